"""Reads that follow pointers (an index to a record, a record to another, an order to its members' records): one
generic script, `read`, that runs a structured step list in one round trip. It knows Redis commands, not rules.

The step list (`ARGV[1]`, JSON) is a list of steps, each an object; its value is named by its position (from 1):

- ``{"c": command, "a": [operand, ...]}``: a Redis command. It is not run when an operand is false (its value is
  then false), nor when a spread adds nothing.
- ``{"v": operand}``: that value; ``{"list": [operand, ...]}``: a list of them (spreads spread, false left out).
- ``{"each": [command, operand, ...], "do": [step, ...]}``: the command gives members; `do` runs once per member
  (its steps named from 1 again). Its value is the outputs of the members that passed, in order, one flat list.
  ``"pairs": 1``: the members come with a score (WITHSCORES). Paged when ``"limit"`` (members kept) or ``"page"``
  is set: the command's operands ``{"i": 0}`` and ``{"i": 1}`` are the page's first and last rank, from
  ``"from"`` (an operand, else 0), until the limit or a short page.

Operands: a string or a number as it is; ``{"k": n}`` KEYS[n]; ``{"r": i}`` step i's value; ``{"m": 1}`` the
member (``{"m": 2}`` its score); ``{"p": [operand, ...]}`` their concatenation (a key built from a prefix and an
id: in the project's hash-tag slot like every key here; false when a part is); ``{"s": i}`` step i's value spread
into arguments (a list, or one value unless false).

Step options: ``"t"`` what the reply becomes: ``"r"`` a hash as the text of one JSON object of its JSON fields
(`record_json`; false when empty), ``"j"`` JSON-decoded (a list: each item; ``"f": name``: then its field; JSON
null: false, left out of a list), ``"i"`` a number as integer text; ``"pre": text`` false unless the reply starts
with the text; ``"need": 1`` an empty value (false, empty list) ends the read with false, or in `do` drops the
member, first running ``"miss": [command, operand, ...]`` if given; ``"out": 1`` the value is part of the answer.

The answer: the values of the output steps, in order (false when a needed one was empty).
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from backends.redis.lua import _RECORD_JSON
from backends.redis.plan import Script, script

script(
    "read",
    _RECORD_JSON
    + """
local function empty(v) return not v or (type(v) == 'table' and #v == 0) end
local function spread(v, into)
  if type(v) == 'table' then
    for _, x in ipairs(v) do into[#into + 1] = x end
  elseif v then
    into[#into + 1] = v
  end
end
-- The operands of `s` (types at s[at], values after): a list, or nil when one is false or a spread adds nothing
-- (`lenient`: those are left out); and where the values end.
local function operands(s, at, vals, member, bounds, lenient)
  local types, out, j, joined, failed = {string.byte(s[at], 1, -1)}, {}, at + 1, false, false
  for c = 1, #types do
    local t, o, v = types[c], s[j], nil
    if t == 43 then
      joined = true
    else
      j = j + 1
      if t == 115 then
        local before = #out
        spread(vals[o], out)
        failed = failed or (#out == before and not lenient)
      else
        if t == 108 then v = o elseif t == 107 then v = KEYS[o] elseif t == 114 then v = vals[o]
        elseif t == 109 then v = member[o] else v = bounds[o + 1] end
        if not v then
          failed = failed or not lenient
        elseif joined then
          out[#out] = out[#out] .. v
        else
          out[#out + 1] = v
        end
        joined = false
      end
    end
  end
  if failed then return nil, j end
  return out, j
end
local function decode(text, field)
  if not text then return false end
  local d = cjson.decode(text)
  if d ~= cjson.null and field then d = d[field] end
  if d == cjson.null or d == nil then return false end
  return d
end
local function shape(t, x, v)
  if t == 'r' then
    if empty(v) then return false end
    return record_json(v)
  elseif t == 'j' then
    if type(v) ~= 'table' then return decode(v, x.f) end
    local out = {}
    for _, item in ipairs(v) do
      local d = decode(item, x.f)
      if d then out[#out + 1] = d end
    end
    return out
  elseif t == 'i' then
    return v and string.format('%.0f', tonumber(v))
  end
  if x.pre and not (type(v) == 'string' and string.sub(v, 1, #x.pre) == x.pre) then return false end
  return v
end
local run
local function each(s, x, vals, member, out)
  local limit, paged = x.limit or -1, x.limit or x.page
  local start, kept, width = 0, 0, x.pairs and 2 or 1
  if x.from then start = tonumber(operands(x.from, 1, vals, member)[1]) end
  while true do
    local want = x.page or (limit - kept)
    local members = redis.call(unpack((operands(s, 4, vals, member, {start, start + want - 1}))))
    for i = 1, #members, width do
      local found = {}
      if run(x['do'], {members[i], members[i + 1]}, found) then
        for _, v in ipairs(found) do out[#out + 1] = v end
        kept = kept + 1
        if kept == limit then return end
      end
    end
    if not paged or #members < want * width then return end
    start = start + want
  end
end
local none = {}
run = function(steps, member, out)
  local vals = {}
  for i, s in ipairs(steps) do
    local kind, mode, v = s[1], s[3], false
    local a, after = operands(s, 4, vals, member, none, kind == 'L')
    local x = s[after] or none
    if kind == 'e' then
      v = {}
      each(s, x, vals, member, v)
    elseif kind == 'v' then
      v = a and a[1] or false
    elseif kind == 'L' then
      v = a
    elseif a then
      v = redis.call(unpack(a))
    end
    if s[2] ~= '' or x.pre then v = shape(s[2], x, v) end
    if mode >= 2 and empty(v) then
      if x.miss then redis.call(unpack((operands(x.miss, 1, vals, member)))) end
      return false
    end
    vals[i] = v
    if mode % 2 == 1 then out[#out + 1] = v end
  end
  return true
end
local out = {}
if not run(cjson.decode(ARGV[1]), {}, out) then return false end
return out
""",
)


#: The member of an `each` (``SCORE``: its score, with ``pairs``).
MEMBER: Final = {"m": 1}
SCORE: Final = {"m": 2}
#: A paged `each`'s first and last rank.
FIRST: Final = {"i": 0}
LAST: Final = {"i": 1}


def key(n: int) -> dict[str, int]:
    """KEYS[n]."""
    return {"k": n}


def ref(i: int) -> dict[str, int]:
    """The value of step `i` (from 1, in its list)."""
    return {"r": i}


def cat(*parts: Any) -> dict[str, Any]:
    """A key made of a prefix and values (in the prefix's slot)."""
    return {"p": list(parts)}


def call(command: str, *args: Any, **options: Any) -> dict[str, Any]:
    return {"c": command, "a": list(args), **options}


def each(command: str, *args: Any, do: list[dict[str, Any]], **options: Any) -> dict[str, Any]:
    return {"each": [command, *args], "do": do, **options}


def _operands(items: list[Any]) -> list[Any]:
    types, values = [], []
    for item in items:
        for n, part in enumerate(item["p"] if isinstance(item, dict) and "p" in item else [item]):
            types.append("+" if n else "")
            ((kind, value),) = part.items() if isinstance(part, dict) else (("l", part),)
            types.append(kind)
            values.append(value)
    return ["".join(types), *values]


def _wire(step: dict[str, Any]) -> list[Any]:
    if "c" in step:
        kind, items = "", [step["c"], *step["a"]]
    else:
        kind = next(k for k in ("each", "list", "v") if k in step)
        items = [step["v"]] if kind == "v" else step[kind]
    mode = (2 if step.get("need") else 0) + (1 if step.get("out") else 0)
    extra: dict[str, Any] = {name: step[name] for name in ("f", "pre", "limit", "page", "pairs") if name in step}
    if "miss" in step:
        extra["miss"] = _operands(step["miss"])
    if "from" in step:
        extra["from"] = _operands([step["from"]])
    if "do" in step:
        extra["do"] = [_wire(inner) for inner in step["do"]]
    kind = {"each": "e", "list": "L", "v": "v"}.get(kind, "c")
    return [kind, step.get("t", ""), mode, *_operands(items), *([extra] if extra else [])]


def encode(steps: list[dict[str, Any]]) -> str:
    """`steps` as the script reads them: arrays of strings and numbers (cjson decodes those far faster than
    objects): ``[kind, t, mode, types, operand, ..., options]``: kind ``c`` (a command), ``v``, ``L`` or ``e``;
    mode 2 for need plus 1 for out; types one character per operand (``l`` a literal, ``k``, ``r``, ``m``, ``i``,
    ``s`` as above, ``+`` joining two into one); options an object, only when there are others."""
    return orjson.dumps([_wire(step) for step in steps]).decode()


def read(keys: tuple[str, ...], steps: list[dict[str, Any]]) -> Script:
    """The `read` script running `steps` (`KEYS` is `keys`: declared, so a cluster routes it to their slot)."""
    return Script("read", keys, (encode(steps),))


def by_index(index: str, field: str, prefix: str, shape: str | None = None) -> Script:
    """The record an index's `field` names: its hash at `prefix` followed by the id stored there (None if none)."""
    record = call("HGETALL", cat(prefix, ref(1)), out=1, **({"t": shape} if shape else {}))
    return read((index,), [call("HGET", key(1), field, need=1), record])


def first(reply: Any) -> Any:
    """The one output of a read (None when a needed step came back empty)."""
    return reply[0] if reply else None
