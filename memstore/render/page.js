(function () {
  "use strict";
  var doc = document;
  doc.documentElement.classList.remove("no-js");
  var main = doc.getElementById("turns");
  var turns = Array.prototype.slice.call(doc.querySelectorAll("article.turn"));
  var count = turns.length;
  var parent = [], segment = [], tip = [], shown = [];
  turns.forEach(function (turn, index) {
    var toward = turn.getAttribute("data-t");
    parent.push(Number(turn.getAttribute("data-p")));
    segment.push(turn.getAttribute("data-s"));
    tip.push(toward === null ? index : Number(toward));
    shown.push(!turn.hidden);
  });
  var head = Number(main.getAttribute("data-head"));
  var selected = Number(main.getAttribute("data-shown"));
  var status = doc.getElementById("status");
  var cont = doc.getElementById("cont");
  var box = null;

  function pathTo(index) {
    var path = [];
    for (; index >= 0; index = parent[index]) path.push(index);
    return path.reverse();
  }

  function showBox(index, length) {
    if (box) box.hidden = true;
    box = doc.getElementById("f" + index);
    if (!box && tip[index] !== index && cont) {
      var more = pathTo(tip[index]).length - length;
      var link = cont.firstElementChild;
      link.setAttribute("href", "#n" + tip[index]);
      link.setAttribute("data-pick", String(tip[index]));
      link.textContent = "Continue this branch: " + more + " more turn" + (more === 1 ? "" : "s") + " \u203a";
      box = cont;
    }
    if (box) box.hidden = false;
  }

  function markSidebar(path, index) {
    var onPath = {};
    path.forEach(function (node) { onPath[segment[node]] = true; });
    doc.querySelectorAll(".side a[data-pick]").forEach(function (link) {
      var row = link.parentNode.getAttribute("data-seg");
      var isRow = row !== null;
      link.classList.toggle("on", isRow && onPath[row] === true);
      link.classList.toggle("current", isRow ? row === segment[index] : Number(link.getAttribute("data-pick")) === index);
    });
  }

  function describe(path, index) {
    var where = index === head ? "the head" : tip[index] === index ? "a branch tip" : "turn #" + path.length + " (the branch goes on)";
    return "Showing " + path.length + " turn" + (path.length === 1 ? "" : "s") + ", from the root to " + where + ".";
  }

  function select(index, scroll) {
    if (!(index >= 0 && index < count)) return;
    var path = pathTo(index), on = new Array(count), firstNew = -1, node;
    path.forEach(function (member) { on[member] = true; });
    for (node = 0; node < path.length; node++) {
      if (!shown[path[node]]) { firstNew = path[node]; break; }
    }
    for (node = 0; node < count; node++) {
      if (Boolean(on[node]) !== shown[node]) {
        shown[node] = Boolean(on[node]);
        turns[node].hidden = !shown[node];
      }
    }
    selected = index;
    showBox(index, path.length);
    markSidebar(path, index);
    if (status) status.textContent = describe(path, index);
    if (scroll) turns[firstNew >= 0 ? firstNew : index].scrollIntoView({ block: "start" });
  }

  function fromHash() {
    var match = /^#n(\d+)$/.exec(location.hash);
    return match ? Number(match[1]) : (head >= 0 ? head : Number(main.getAttribute("data-shown")));
  }

  function follow() {
    var index = fromHash();
    if (index !== selected) select(index, true);
  }

  // Find: the turns holding the text (the shown branch first, then the others in page order);
  // each step shows the next one's branch, opens what folds it, marks the text and scrolls to it.
  var findBox = doc.getElementById("find");
  var found = doc.getElementById("found");
  var texts = null, hits = [], hitAt = -1, asked = "", marked = null;

  function bodyText(turn) {
    var parts = [];
    for (var child = turn.firstElementChild; child; child = child.nextElementSibling) {
      if (child.tagName !== "HEADER") parts.push(child.textContent);
    }
    return parts.join("\n").toLowerCase();
  }

  function rangeOf(turn, query) {
    var walker = doc.createTreeWalker(turn, 4), node, at;  // 4: NodeFilter.SHOW_TEXT
    while ((node = walker.nextNode())) {
      if (node.parentNode.closest("header")) continue;
      at = node.data.toLowerCase().indexOf(query);
      if (at >= 0) {
        var range = doc.createRange();
        range.setStart(node, at);
        range.setEnd(node, at + query.length);
        return range;
      }
    }
    return null;
  }

  function mark(index, query) {
    if (marked) marked.classList.remove("found");
    marked = turns[index];
    marked.classList.add("found");
    var range = rangeOf(marked, query), target = marked;
    if (range) {
      target = range.startContainer.parentNode;
      for (var up = target; up && up !== marked; up = up.parentNode) {
        if (up.tagName === "DETAILS") up.open = true;
      }
      if (window.CSS && CSS.highlights && window.Highlight) CSS.highlights.set("find", new Highlight(range));
    }
    target.scrollIntoView({ block: "center" });
  }

  function find(step) {
    var query = findBox.value.toLowerCase();
    if (query !== asked) {
      asked = query;
      hits = [];
      hitAt = -1;
      if (query) {
        if (!texts) texts = turns.map(bodyText);
        var path = selected >= 0 ? pathTo(selected) : [], first = {};
        path.forEach(function (node) { if (texts[node].indexOf(query) >= 0) { hits.push(node); first[node] = true; } });
        texts.forEach(function (body, node) { if (!first[node] && body.indexOf(query) >= 0) hits.push(node); });
      }
    }
    if (!query) { found.textContent = ""; return; }
    if (!hits.length) { found.textContent = "not found"; return; }
    hitAt = (hitAt + step + hits.length) % hits.length;
    var index = hits[hitAt];
    if (turns[index].hidden) select(index, false);
    mark(index, query);
    found.textContent = (hitAt + 1) + " of " + hits.length + " turns";
  }

  doc.addEventListener("keydown", function (event) {
    if (findBox && event.target === findBox && event.key === "Enter") {
      event.preventDefault();
      find(event.shiftKey ? -1 : 1);
    }
  });

  doc.addEventListener("click", function (event) {
    var target = event.target;
    if (!target || !target.closest) return;
    var link = target.closest("a[data-pick]");
    if (link && event.button === 0 && !(event.ctrlKey || event.metaKey || event.shiftKey || event.altKey)) {
      var pick = link.getAttribute("data-pick");
      if (pick === "") return;
      event.preventDefault();
      try { history.pushState(null, "", "#n" + pick); } catch (error) { /* a sandboxed page */ }
      select(Number(pick), true);
      return;
    }
    var step = target.closest("button[data-find]");
    if (step && findBox) {
      find(Number(step.getAttribute("data-find")));
      return;
    }
    var button = target.closest("button[data-fold]");
    if (button) {
      var open = button.getAttribute("data-fold") === "1";
      main.querySelectorAll("details").forEach(function (details) { details.open = open; });
    }
  });
  window.addEventListener("popstate", follow);
  window.addEventListener("hashchange", follow);
  // Open at the address's turn, else at the head (the newest turn of the shown branch).
  if (/^#n\d+$/.test(location.hash)) follow();
  else if (selected >= 0) {
    select(selected, false);
    turns[selected].scrollIntoView({ block: "start" });
  }
})();
