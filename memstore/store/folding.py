"""How search reads text, alike on SQLite and PostgreSQL: words of letters and digits, case
and accents aside (`naive` finds `naïve` and `naïve` finds `naive`).

SQLite's FTS5 tokenizer (`unicode61`, `remove_diacritics 1`, its default) folds each letter to
lower case and takes the accent off a Latin letter that carries one (`é` -> `e`; a letter with
two, such as Vietnamese `ệ`, stays as it is), drops a few combining accents written as
characters of their own, and reads every other character as a space. PostgreSQL has no such
folding without an extension (`unaccent`, which an application's login may not be allowed to
install), and its parser reads `example.com`, `1.5`, `a-b`, `/usr/bin` and `a@b.c` as single
words (or drops `<tags>`), where FTS5 sees their parts. So its search indexes hold the text
through `memstore_search_fold` (an immutable SQL function of `translate`, made by migration 0020
from the tables below): accents off as FTS5 takes them off, ASCII punctuation as spaces.
Queries are folded here, in Python, with the same tables (`fold`, `sql_fold`).

The accent table is FTS5's folding of every character where it differs from Python's
`str.lower` (accents, and a few case foldings such as final sigma); a test checks that the
running SQLite's FTS5 folds exactly so, and that the migration holds the same tables.
"""

from __future__ import annotations

import string

__all__ = [
    "ACCENTED",
    "DROPPED",
    "FOLDED",
    "FOLDED_TO",
    "SPACED",
    "SQL_FOLD",
    "fold",
    "fold_in_place",
    "sql_fold",
]

SQL_FOLD = "memstore_search_fold"
"""The name of PostgreSQL's folding function (migration 0020)."""

# The characters FTS5 folds to another one, and what it folds each to (the same length).
FOLDED = (
    "\u00b5\u00c0\u00c1\u00c2\u00c3\u00c4\u00c5\u00c7\u00c8\u00c9\u00ca\u00cb\u00cc\u00cd"
    "\u00ce\u00cf\u00d1\u00d2\u00d3\u00d4\u00d5\u00d6\u00d9\u00da\u00db\u00dc\u00dd\u00e0"
    "\u00e1\u00e2\u00e3\u00e4\u00e5\u00e7\u00e8\u00e9\u00ea\u00eb\u00ec\u00ed\u00ee\u00ef"
    "\u00f1\u00f2\u00f3\u00f4\u00f5\u00f6\u00f9\u00fa\u00fb\u00fc\u00fd\u00ff\u0100\u0101"
    "\u0102\u0103\u0104\u0105\u0106\u0107\u0108\u0109\u010a\u010b\u010c\u010d\u010e\u010f"
    "\u0112\u0113\u0114\u0115\u0116\u0117\u0118\u0119\u011a\u011b\u011c\u011d\u011e\u011f"
    "\u0120\u0121\u0122\u0123\u0124\u0125\u0128\u0129\u012a\u012b\u012c\u012d\u012e\u012f"
    "\u0130\u0134\u0135\u0136\u0137\u0139\u013a\u013b\u013c\u013d\u013e\u0143\u0144\u0145"
    "\u0146\u0147\u0148\u014c\u014d\u014e\u014f\u0150\u0151\u0154\u0155\u0156\u0157\u0158"
    "\u0159\u015a\u015b\u015c\u015d\u015e\u015f\u0160\u0161\u0162\u0163\u0164\u0165\u0168"
    "\u0169\u016a\u016b\u016c\u016d\u016e\u016f\u0170\u0171\u0172\u0173\u0174\u0175\u0176"
    "\u0177\u0178\u0179\u017a\u017b\u017c\u017d\u017e\u017f\u01a0\u01a1\u01af\u01b0\u01cd"
    "\u01ce\u01cf\u01d0\u01d1\u01d2\u01d3\u01d4\u01e6\u01e7\u01e8\u01e9\u01ea\u01eb\u01f0"
    "\u01f4\u01f5\u01f8\u01f9\u0200\u0201\u0202\u0203\u0204\u0205\u0206\u0207\u0208\u0209"
    "\u020a\u020b\u020c\u020d\u020e\u020f\u0210\u0211\u0212\u0213\u0214\u0215\u0216\u0217"
    "\u0218\u0219\u021a\u021b\u021e\u021f\u0226\u0227\u0228\u0229\u022e\u022f\u0232\u0233"
    "\u03c2\u03d0\u03d1\u03d5\u03d6\u03f0\u03f1\u03f5\u1e00\u1e01\u1e02\u1e03\u1e04\u1e05"
    "\u1e06\u1e07\u1e0a\u1e0b\u1e0c\u1e0d\u1e0e\u1e0f\u1e10\u1e11\u1e12\u1e13\u1e18\u1e19"
    "\u1e1a\u1e1b\u1e1e\u1e1f\u1e20\u1e21\u1e22\u1e23\u1e24\u1e25\u1e26\u1e27\u1e28\u1e29"
    "\u1e2a\u1e2b\u1e2c\u1e2d\u1e30\u1e31\u1e32\u1e33\u1e34\u1e35\u1e36\u1e37\u1e3a\u1e3b"
    "\u1e3c\u1e3d\u1e3e\u1e3f\u1e40\u1e41\u1e42\u1e43\u1e44\u1e45\u1e46\u1e47\u1e48\u1e49"
    "\u1e4a\u1e4b\u1e54\u1e55\u1e56\u1e57\u1e58\u1e59\u1e5a\u1e5b\u1e5e\u1e5f\u1e60\u1e61"
    "\u1e62\u1e63\u1e6a\u1e6b\u1e6c\u1e6d\u1e6e\u1e6f\u1e70\u1e71\u1e72\u1e73\u1e74\u1e75"
    "\u1e76\u1e77\u1e7c\u1e7d\u1e7e\u1e7f\u1e80\u1e81\u1e82\u1e83\u1e84\u1e85\u1e86\u1e87"
    "\u1e88\u1e89\u1e8a\u1e8b\u1e8c\u1e8d\u1e8e\u1e8f\u1e90\u1e91\u1e92\u1e93\u1e94\u1e95"
    "\u1e96\u1e97\u1e98\u1e99\u1e9b\u1ea0\u1ea1\u1ea2\u1ea3\u1eb8\u1eb9\u1eba\u1ebb\u1ebc"
    "\u1ebd\u1ec8\u1ec9\u1eca\u1ecb\u1ecc\u1ecd\u1ece\u1ecf\u1ee4\u1ee5\u1ee6\u1ee7\u1ef2"
    "\u1ef3\u1ef4\u1ef5\u1ef6\u1ef7\u1ef8\u1ef9\u1fbe\u212b"
)
FOLDED_TO = (
    "\u03bcaaaaaaceeeeiiiinooooouuuuyaaaaaaceeeeiiiinooooouuuuyyaaaaaaccccccccddeeeeeeeee"
    "egggggggghhiiiiiiiiijjkkllllllnnnnnnoooooorrrrrrssssssssttttuuuuuuuuuuuuwwyyyzzzzzzs"
    "oouuaaiioouuggkkoojggnnaaaaeeeeiiiioooorrrruuuusstthhaaeeooyy\u03c3\u03b2\u03b8"
    "\u03c6\u03c0\u03ba\u03c1\u03b5aabbbbbbddddddddddeeeeffgghhhhhhhhhhiikkkkkkllllllmmmm"
    "mmnnnnnnnnpppprrrrrrssssttttttttuuuuuuvvvvwwwwwwwwwwxxxxyyzzzzzzhtwysaaaaeeeeeeiiiio"
    "ooouuuuyyyyyyyy\u03b9a"
)
DROPPED = (
    "\u0300\u0301\u0302\u0303\u0304\u0306\u0307\u0308\u0309\u030a\u030b\u030c\u030f\u0311"
    "\u031b\u0323\u0324\u0325\u0326\u0327\u0328\u032d\u032e\u0330\u0331"
)
"""Combining accents (characters of their own) that FTS5 drops."""

SPACED = string.punctuation
"""ASCII punctuation, which PostgreSQL's folding makes spaces (FTS5 reads it so anyway)."""
ACCENTED = "[\u00b5-\u0233\u0300-\u0331\u03c2-\u03f5\u1e00-\u1ef9\u1fbe\u212b]"
"""A regular expression's class holding every character of the table: PostgreSQL runs the
table's `translate` (slow: it scans the table for each character) only on text it matches."""

_FOLD = str.maketrans(FOLDED, FOLDED_TO, DROPPED)
_SQL_FOLD = str.maketrans(FOLDED + SPACED, FOLDED_TO + " " * len(SPACED), DROPPED)
_FOLD_IN_PLACE = str.maketrans(FOLDED, FOLDED_TO)


def fold(text: str) -> str:
    """`text` with accents taken off as the search indexes hold it (PostgreSQL lowers the
    case of what is left; so does FTS5)."""
    return text if text.isascii() else text.translate(_FOLD)


def sql_fold(text: str) -> str:
    """`text` as PostgreSQL's `memstore_search_fold` makes it: accents off, ASCII punctuation
    spaces."""
    return text.translate(_SQL_FOLD)


def fold_in_place(text: str) -> str:
    """`text` folded character for character, keeping its length (combining accents stay), so
    that a match found in it is at the same place in `text`: for snippets."""
    return text if text.isascii() else text.translate(_FOLD_IN_PLACE)
