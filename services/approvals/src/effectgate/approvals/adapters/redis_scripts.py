"""The Lua scripts of the Redis approval store: each transition is one atomic script."""

from __future__ import annotations

from typing import Final

__all__ = ["OPEN", "RESOLVE", "RESTORE_JOIN", "VOTE", "WITHDRAW"]

OPEN: Final = """
-- KEYS: approval, state, pending set, epoch, same-request index, joined-to (of the new id)
-- ARGV: json, expiry, keep_s, id, check_epoch, key digest, now, request id, may_join
if ARGV[5] == '1' and redis.call('EXISTS', KEYS[4]) == 0 then return {-1, ''} end
if redis.call('EXISTS', KEYS[1]) == 1 then return {1, ARGV[4]} end
local joined = redis.call('GET', KEYS[6])
if joined then return {2, joined} end
if ARGV[9] == '1' and ARGV[6] ~= '' then
  local index = redis.call('HGETALL', KEYS[5])
  for i = 1, #index, 2 do
    local other = index[i]
    local expiry = redis.call('ZSCORE', KEYS[3], other)
    local state = redis.call('GET', 'tg:approval:' .. other .. ':state')
    if index[i + 1] == ARGV[6] and state == 'pending' and expiry and tonumber(expiry) > tonumber(ARGV[7]) then
      redis.call('RPUSH', 'tg:approval:' .. other .. ':joined', ARGV[8])
      redis.call('EXPIRE', 'tg:approval:' .. other .. ':joined', ARGV[3])
      redis.call('SET', KEYS[6], other, 'EX', ARGV[3])
      return {2, other}
    end
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[3])
redis.call('SET', KEYS[2], 'pending', 'EX', ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[4])
redis.call('HSET', KEYS[5], ARGV[4], ARGV[6])
redis.call('EXPIRE', KEYS[5], ARGV[3])
return {1, ARGV[4]}
"""
"""Opens an approval whole (listed, answerable, expiring, indexed) or joins the pending one it duplicates.

Returns ``{1, id}`` opened (or opened before), ``{2, other id}`` joined, ``{-1, ''}`` no epoch.
"""

_REPLY = """
local function reply(status, state)
  return {status, state or '', unpack(redis.call('LRANGE', KEYS[5], 0, -1))}
end
"""

VOTE: Final = (
    _REPLY
    + """
-- KEYS: state, pending set, resolver token, epoch, votes, vote tokens, answerer
-- ARGV: approver, required, token, keep_s, id
if redis.call('EXISTS', KEYS[4]) == 0 then return {'index_lost'} end
local state = redis.call('GET', KEYS[1])
if state ~= 'pending' then
  if state == 'granted' and redis.call('GET', KEYS[3]) == ARGV[3] then return reply('granted', state) end
  return reply('not_pending', state)
end
local mine = redis.call('HGET', KEYS[6], ARGV[1])
if mine then return reply(mine == ARGV[3] and 'voted' or 'already_voted', state) end
redis.call('HSET', KEYS[6], ARGV[1], ARGV[3])
redis.call('EXPIRE', KEYS[6], ARGV[4])
redis.call('RPUSH', KEYS[5], ARGV[1])
redis.call('EXPIRE', KEYS[5], ARGV[4])
if redis.call('LLEN', KEYS[5]) < tonumber(ARGV[2]) then return reply('voted', state) end
redis.call('SET', KEYS[1], 'granted', 'KEEPTTL')
redis.call('SET', KEYS[3], ARGV[3], 'EX', ARGV[4])
redis.call('SET', KEYS[7], ARGV[1], 'EX', ARGV[4])
redis.call('ZREM', KEYS[2], ARGV[5])
return reply('granted', 'granted')
"""
)
"""Records one distinct vote, and grants in the same step when it completes the quorum.

Returns ``{status, state, votes...}``; a retried call (same token) answers as the first did.
"""

WITHDRAW: Final = (
    _REPLY
    + """
-- KEYS: state, unused, unused, epoch, votes, vote tokens
-- ARGV: approver
if redis.call('EXISTS', KEYS[4]) == 0 then return {'index_lost'} end
local state = redis.call('GET', KEYS[1])
if state ~= 'pending' then return reply('not_pending', state) end
if redis.call('HDEL', KEYS[6], ARGV[1]) == 0 then return reply('not_voted', state) end
redis.call('LREM', KEYS[5], 0, ARGV[1])
return reply('withdrawn', state)
"""
)
"""Removes one approver's vote from a pending approval. Returns ``{status, state, votes...}``."""

RESOLVE: Final = """
-- KEYS: state, pending set, resolver token, epoch, answerer; ARGV: new state, id, token, keep_s, answerer
if redis.call('EXISTS', KEYS[4]) == 0 then return -1 end
local state = redis.call('GET', KEYS[1])
if state == ARGV[1] and redis.call('GET', KEYS[3]) == ARGV[3] then return 1 end
if state ~= 'pending' then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'KEEPTTL')
redis.call('SET', KEYS[3], ARGV[3], 'EX', ARGV[4])
if ARGV[5] ~= '' then redis.call('SET', KEYS[5], ARGV[5], 'EX', ARGV[4]) end
redis.call('ZREM', KEYS[2], ARGV[2])
return 1
"""
"""Moves ``pending`` to a final state once; a retried call (same token) wins again."""

RESTORE_JOIN: Final = """
-- KEYS: joined list (of the approval), joined-to (of the request's own id); ARGV: request id, approval id, keep_s
if redis.call('SET', KEYS[2], ARGV[2], 'NX', 'EX', ARGV[3]) then
  redis.call('RPUSH', KEYS[1], ARGV[1])
  redis.call('EXPIRE', KEYS[1], ARGV[3])
end
return 1
"""
"""Re-attaches a joined request during a rebuild, once."""
