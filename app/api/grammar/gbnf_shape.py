"""What llama.cpp's grammar parser would build from a GBNF text, measured without building it.

llama.cpp parses a request's grammar on the engine thread (`llama_sampler_init_grammar`), where
every slot waits for it and nothing can stop it. Its costs are not its length: the parser
recurses once per nested group (deep nesting overflows the thread's stack and kills the
process), writes a repetition `x{m,n}` out as m copies of x and n - m rules, and then walks,
recursively, every chain of rules that start with a rule (`r0 ::= r1 "x"`, `r1 ::= r2 "x"`:
memory and time grow with the square of the chain), and fans out to one stack per alternative
a step can begin with, which rules of alternatives that start with rules multiply (twenty such
lines take minutes). So the text is read here, mirroring llama.cpp's parser
(src/llama-grammar.cpp, `parse_sequence`), iteratively and in linear time, and what it would
build is measured: `GbnfShape`.

A text this reader cannot read is one llama.cpp's parser refuses too (`GbnfError`).
"""

from __future__ import annotations

from dataclasses import dataclass

from app.api.grammar.gbnf_rules import EMPTY, REF, TERM, GbnfError, Item, Node, measure

# Groups within groups, and rules that begin with rules: llama.cpp recurses once per level,
# about 0.5 KiB of stack each; 1024 levels fit a 2 MiB thread stack twice over.
MAX_DEPTH = 1024
_ESCAPES = {"x": 2, "u": 4, "U": 8, "t": 0, "r": 0, "n": 0, "\\": 0, '"': 0, "[": 0, "]": 0}
_ESCAPES["-"] = 0
_HEX = frozenset("0123456789abcdefABCDEF")

__all__ = ["MAX_DEPTH", "GbnfError", "GbnfShape", "gbnf_shape"]


@dataclass(slots=True, frozen=True)
class GbnfShape:
    depth: int  # deepest nesting of groups
    repeats: int  # counted repetitions ({m,n}) together: the larger bound of each
    largest_repeat: int  # the largest bound of one {m,n}
    expanded: int  # elements the parser writes, repetitions written out
    chain: int  # longest chain of rules each beginning with the next
    leads: int  # most stacks one step can fan out to


def _is_word(c: str) -> bool:
    return c.isascii() and (c.isalnum() or c == "-")


class _Reader:
    def __init__(self, text: str, max_depth: int) -> None:
        self.text, self.pos, self.max_depth = text, 0, max_depth
        self.nodes: list[Node] = []
        self.names: dict[str, int] = {}
        self.defined: set[int] = set()
        self.depth = self.repeats = self.largest = self.expanded = 0

    def fail(self, what: str) -> GbnfError:
        near = self.text[self.pos : self.pos + 20]
        return GbnfError(f"{what} at character {self.pos}" + (f" ({near!r})" if near else ""))

    def peek(self, k: int = 0) -> str:
        i = self.pos + k
        return self.text[i] if i < len(self.text) else ""

    def space(self, newline_ok: bool) -> None:
        text, n = self.text, len(self.text)
        while self.pos < n:
            c = text[self.pos]
            if c == "#":
                while self.pos < n and text[self.pos] not in "\r\n":
                    self.pos += 1
            elif c in " \t" or (newline_ok and c in "\r\n"):
                self.pos += 1
            else:
                return

    def name(self) -> str:
        start = self.pos
        while _is_word(self.peek()):
            self.pos += 1
        if self.pos == start:
            raise self.fail("expecting a rule name")
        return self.text[start : self.pos]

    def node_of(self, name: str) -> int:
        if name not in self.names:
            self.names[name] = self.new_node()
        return self.names[name]

    def new_node(self) -> int:
        self.nodes.append(Node())
        return len(self.nodes) - 1

    def char(self) -> None:
        """One character of a literal or a class, escapes as llama.cpp reads them."""
        c = self.peek()
        if not c:
            raise self.fail("unexpected end of input")
        if c != "\\":
            self.pos += 1
            return
        digits = _ESCAPES.get(self.peek(1))
        if digits is None:
            raise self.fail("unknown escape")
        hexes = self.text[self.pos + 2 : self.pos + 2 + digits]
        if len(hexes) != digits or not set(hexes) <= _HEX:
            raise self.fail(f"expecting {digits} hex characters")
        self.pos += 2 + digits

    def integer(self) -> int:
        start = self.pos
        while self.peek().isascii() and self.peek().isdigit():
            self.pos += 1
        if self.pos == start:
            raise self.fail("expecting an integer")
        return int(self.text[start : self.pos])

    def literal(self) -> Item:
        self.pos += 1
        n = 0
        while self.peek() != '"':
            self.char()
            n += 1
        self.pos += 1
        return Item(TERM, size=n) if n else Item(EMPTY, size=0)

    def char_class(self) -> Item:
        self.pos += 1
        if self.peek() == "^":
            self.pos += 1
        n = 0
        while self.peek() != "]":
            self.char()
            n += 1
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.pos += 1
                self.char()
                n += 1
        self.pos += 1
        return Item(TERM, size=n)

    def token(self) -> Item:
        if self.peek() == "!":
            self.pos += 1
        if self.peek() != "<":
            raise self.fail("expecting '<'")
        end = self.text.find(">", self.pos)
        if end < 0:
            raise self.fail("expecting '>'")
        self.pos = end + 1
        return Item(TERM)

    def repetition(self, seq: list[Item], nested: bool) -> None:
        """`*`, `+`, `?` or `{m}`, `{m,}`, `{m,n}` on the item before it, counted as llama.cpp
        writes it out: m copies, then n - m rules of one copy each (one rule without n)."""
        if not seq or seq[-1].kind == EMPTY:
            raise self.fail("expecting an item before a repetition")
        c = self.peek()
        self.pos += 1
        self.space(nested)
        low, high = {"*": (0, None), "+": (1, None), "?": (0, 1)}.get(c, (0, None))
        if c == "{":
            low = high = self.integer()
            self.space(nested)
            if self.peek() == ",":
                self.pos += 1
                self.space(nested)
                high = self.integer() if self.peek().isdigit() else None
                self.space(nested)
            if self.peek() != "}":
                raise self.fail("expecting '}'")
            self.pos += 1
            self.space(nested)
            bound = max(low, high or 0)
            self.repeats += bound
            self.largest = max(self.largest, bound)
        item = seq[-1]
        optional_rules = 1 if high is None else high - low
        self.expanded += low * item.size + optional_rules * (item.size + 3)
        item.size = low * item.size + (1 if optional_rules else 0)
        item.copies *= max(low, high if high is not None else low + 1, 1)
        item.optional = item.optional or low == 0

    def rule(self) -> None:
        """One `name ::= alternatives` line; groups are read with a stack of their own."""
        node = self.node_of(self.name())
        self.space(False)
        if not self.text.startswith("::=", self.pos):
            raise self.fail("expecting ::=")
        self.pos += 3
        self.space(True)
        self.nodes[node] = Node()  # a rule defined again is its last definition
        self.defined.add(node)
        open_groups = [node]
        while True:
            nested = len(open_groups) > 1
            seq = self.nodes[open_groups[-1]].alts[-1]
            c = self.peek()
            if c == "(":
                self.pos += 1
                self.space(True)
                group = self.new_node()
                seq.append(Item(REF, group))
                open_groups.append(group)
                if len(open_groups) - 1 > self.max_depth:
                    raise GbnfError(f"groups are nested more than {self.max_depth} deep")
                self.depth = max(self.depth, len(open_groups) - 1)
                continue
            if c == ")" and nested:
                self.pos += 1
                open_groups.pop()
                self.space(len(open_groups) > 1)
                continue
            if c == "|":
                self.pos += 1
                self.space(True)
                self.nodes[open_groups[-1]].alts.append([])
                continue
            if c in ("*", "+", "?", "{"):
                self.repetition(seq, nested)
                continue
            if c == '"':
                seq.append(self.literal())
            elif c == "[":
                seq.append(self.char_class())
            elif c in ("<", "!"):
                seq.append(self.token())
            elif c == ".":
                self.pos += 1
                seq.append(Item(TERM))
            elif c and _is_word(c):
                seq.append(Item(REF, self.node_of(self.name())))
            else:
                break
            self.space(nested)
        if len(open_groups) > 1:
            raise self.fail("expecting ')'")
        if self.peek() not in ("\r", "\n", ""):
            raise self.fail("expecting a newline or the end")
        self.space(True)


def gbnf_shape(text: str, root: str = "root", max_depth: int = MAX_DEPTH) -> GbnfShape:
    """The shape of `text`'s grammar; GbnfError if llama.cpp would refuse it or it nests (in
    groups or in rules that begin with rules) more than `max_depth` deep."""
    reader = _Reader(text, max_depth)
    reader.space(True)
    while reader.pos < len(text):
        reader.rule()
    for name, node in reader.names.items():
        if node not in reader.defined:
            raise GbnfError(f"rule {name!r} is used but not defined")
    if root not in reader.names:
        raise GbnfError(f"the grammar has no {root!r} rule")
    rules = measure(reader.nodes, max_depth)
    return GbnfShape(
        reader.depth, reader.repeats, reader.largest, reader.expanded, rules.chain, rules.leads
    )
