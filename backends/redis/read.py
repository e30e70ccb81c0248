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
local function operand(o, vals, member, bounds)
  if type(o) ~= 'table' then return o end
  if o.k then return KEYS[o.k] end
  if o.r then return vals[o.r] end
  if o.m then return member[o.m] end
  if o.i then return bounds[o.i + 1] end
  local parts = {}
  for i, part in ipairs(o.p) do
    parts[i] = operand(part, vals, member, bounds)
    if not parts[i] then return false end
  end
  return table.concat(parts)
end
local function spread(v, into)
  if type(v) == 'table' then
    for _, x in ipairs(v) do into[#into + 1] = x end
  elseif v then
    into[#into + 1] = v
  end
end
local function args(list, vals, member, bounds)
  local out = {}
  for _, o in ipairs(list) do
    if type(o) == 'table' and o.s then
      local before = #out
      spread(vals[o.s], out)
      if #out == before then return nil end
    else
      local v = operand(o, vals, member, bounds)
      if not v then return nil end
      out[#out + 1] = v
    end
  end
  return out
end
local function decode(text, field)
  if not text then return false end
  local d = cjson.decode(text)
  if d ~= cjson.null and field then d = d[field] end
  if d == cjson.null or d == nil then return false end
  return d
end
local function shape(s, v)
  if s.t == 'r' then
    if empty(v) then return false end
    return record_json(v)
  elseif s.t == 'j' then
    if type(v) ~= 'table' then return decode(v, s.f) end
    local out = {}
    for _, x in ipairs(v) do
      local d = decode(x, s.f)
      if d then out[#out + 1] = d end
    end
    return out
  elseif s.t == 'i' then
    return v and string.format('%.0f', tonumber(v))
  end
  if s.pre and not (type(v) == 'string' and string.sub(v, 1, #s.pre) == s.pre) then return false end
  return v
end
local run
local function each(s, vals, member, out)
  local limit, paged = s.limit or -1, s.limit or s.page
  local start, kept, width = 0, 0, s.pairs and 2 or 1
  if s.from then start = tonumber(operand(s.from, vals, member)) end
  while true do
    local want = s.page or (limit - kept)
    local call = args(s.each, vals, member, {start, start + want - 1})
    local members = redis.call(unpack(call))
    for i = 1, #members, width do
      local found = {}
      if run(s['do'], {members[i], members[i + 1]}, found) then
        for _, v in ipairs(found) do out[#out + 1] = v end
        kept = kept + 1
        if kept == limit then return end
      end
    end
    if not paged or #members < want * width then return end
    start = start + want
  end
end
run = function(steps, member, out)
  local vals = {}
  for i, s in ipairs(steps) do
    local v = false
    if s.each then
      v = {}
      each(s, vals, member, v)
    elseif s.v ~= nil then
      v = operand(s.v, vals, member)
    elseif s.list then
      v = {}
      for _, o in ipairs(s.list) do
        if type(o) == 'table' and o.s then spread(vals[o.s], v) else spread(operand(o, vals, member), v) end
      end
    else
      local a = args(s.a, vals, member)
      if a then v = redis.call(s.c, unpack(a)) end
    end
    v = shape(s, v)
    if s.need and empty(v) then
      if s.miss then redis.call(unpack(args(s.miss, vals, member))) end
      return false
    end
    vals[i] = v
    if s.out then out[#out + 1] = v end
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


def read(keys: tuple[str, ...], steps: list[dict[str, Any]]) -> Script:
    """The `read` script running `steps` (`KEYS` is `keys`: declared, so a cluster routes it to their slot)."""
    return Script("read", keys, (orjson.dumps(steps).decode(),))


def by_index(index: str, field: str, prefix: str, shape: str | None = None) -> Script:
    """The record an index's `field` names: its hash at `prefix` followed by the id stored there (None if none)."""
    record = call("HGETALL", cat(prefix, ref(1)), out=1, **({"t": shape} if shape else {}))
    return read((index,), [call("HGET", key(1), field, need=1), record])


def first(reply: Any) -> Any:
    """The one output of a read (None when a needed step came back empty)."""
    return reply[0] if reply else None
