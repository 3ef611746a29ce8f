// pi's own SessionManager (npm @mariozechner/pi-coding-agent), for tests/test_foreign_generated.py.
//
//   node pi_sessions.mjs <node_modules> generate <dir>   writes format 3 sessions, prints their paths
//   node pi_sessions.mjs <node_modules> tree <file>      prints the tree pi's reader builds, as JSON
//   node pi_sessions.mjs <node_modules> folders <dir> <cwd>...   prints the session folder pi
//                                                   makes (under <dir>) for each cwd, as JSON
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [modules, command, target, ...rest] = process.argv.slice(2);
const pi = await import(
  pathToFileURL(join(modules, "@mariozechner/pi-coding-agent/dist/index.js")).href
);
const { SessionManager } = pi;

const usage = (input, output, total) => ({
  input,
  output,
  cacheRead: 3,
  cacheWrite: 1,
  totalTokens: input + output + 4,
  cost: { input: total / 2, output: total / 2, cacheRead: 0, cacheWrite: 0, total },
});
const user = (text) => ({ role: "user", content: [{ type: "text", text }], timestamp: Date.now() });
const assistant = (content, n) => ({
  role: "assistant",
  content,
  api: "anthropic-messages",
  provider: "anthropic",
  model: "claude-sonnet-4-5",
  usage: usage(10 * n, 5 * n, 0.001 * n),
  stopReason: content.some((part) => part.type === "toolCall") ? "toolUse" : "stop",
  timestamp: Date.now(),
});
const toolResult = (id, text, isError = false) => ({
  role: "toolResult",
  toolCallId: id,
  toolName: "bash",
  content: [{ type: "text", text }],
  isError,
  timestamp: Date.now(),
});

function generate(dir) {
  const made = [];
  // A session with branches, a compaction, a branch summary, labels, a name and custom entries.
  const sm = SessionManager.create("/tmp/project", dir);
  sm.appendModelChange("anthropic", "claude-sonnet-4-5");
  sm.appendThinkingLevelChange("low");
  const first = sm.appendMessage(user("list the files, please"));
  sm.appendMessage(
    assistant(
      [
        { type: "thinking", thinking: "I should run ls." },
        { type: "text", text: "Running ls." },
        { type: "toolCall", id: "call_1", name: "bash", arguments: { command: "ls" } },
      ],
      1,
    ),
  );
  const result = sm.appendMessage(toolResult("call_1", "README.md\nsrc\n"));
  const answer = sm.appendMessage(assistant([{ type: "text", text: "Two entries: README.md, src." }], 2));
  sm.appendLabelChange(answer, "checkpoint");
  sm.appendSessionInfo("listing files");
  sm.appendCustomEntry("my-extension", { counter: 1 });
  sm.appendMessage(user("now count the lines of README.md"));
  sm.appendMessage(
    assistant([{ type: "toolCall", id: "call_2", name: "bash", arguments: { command: "wc -l README.md" } }], 3),
  );
  sm.appendMessage(toolResult("call_2", "wc: README.md: permission denied", true));
  sm.appendCompaction("The user listed files; counting README.md failed.", result, 1234, { readFiles: [] });
  sm.appendMessage(user("try again with sudo"));
  sm.appendMessage(assistant([{ type: "text", text: "I will not use sudo." }], 4));
  // Back to an earlier point: a second branch, then one that starts with a branch summary.
  sm.branch(first);
  sm.appendMessage(assistant([{ type: "text", text: "Another way: find ." }], 5));
  sm.appendMessage(user("zeige mir die Größe — 日本語 too"));
  sm.appendMessage(assistant([{ type: "text", text: "ok" }], 6));
  sm.branchWithSummary(answer, "Tried a second approach with find; it was slower.", { note: 1 });
  sm.appendCustomMessageEntry?.("my-extension", "a custom message", true, { x: 1 });
  sm.appendMessage(user("and the image?"));
  sm.appendMessage(
    assistant([{ type: "text", text: "Here." }, { type: "toolCall", id: "call_3", name: "read", arguments: { path: "a.png" } }], 7),
  );
  sm.appendMessage({
    role: "toolResult",
    toolCallId: "call_3",
    toolName: "read",
    content: [{ type: "text", text: "an image" }, { type: "image", data: "iVBORw0KGgo=", mimeType: "image/png" }],
    isError: false,
    timestamp: Date.now(),
  });
  sm.appendLabelChange(first, "start");
  sm.appendLabelChange(answer, undefined);
  made.push(sm.getSessionFile());
  // A plain linear session, and a session left on a model change (its leaf is not a message).
  const linear = SessionManager.create("/tmp/other", dir);
  for (let n = 1; n <= 30; n++) {
    linear.appendMessage(user(`question ${n}`));
    linear.appendMessage(assistant([{ type: "text", text: `answer ${n}` }], n));
  }
  linear.appendModelChange("openai", "gpt-5");
  made.push(linear.getSessionFile());
  return made;
}

function tree(file) {
  const sm = SessionManager.open(file);
  const labels = {};
  for (const entry of sm.getEntries()) {
    const label = sm.getLabel(entry.id);
    if (label !== undefined) labels[entry.id] = label;
  }
  return {
    header: sm.getHeader(),
    leaf: sm.getLeafId(),
    name: sm.getSessionName() ?? null,
    labels,
    entries: sm.getEntries().map((entry) => ({ id: entry.id, parentId: entry.parentId, type: entry.type })),
    context: sm.buildSessionContext().messages.length,
  };
}

if (command === "generate") {
  console.log(JSON.stringify(generate(target)));
} else if (command === "tree") {
  console.log(JSON.stringify(tree(target)));
} else if (command === "folders") {
  const { getDefaultSessionDir } = await import(
    pathToFileURL(join(modules, "@mariozechner/pi-coding-agent/dist/core/session-manager.js")).href
  );
  console.log(JSON.stringify(rest.map((cwd) => getDefaultSessionDir(cwd, target))));
} else {
  throw new Error(`unknown command ${command}`);
}
