"""The Lua steps of the Redis catalog: each runs atomically on the server, so a reader sees a document
either before or after a write, never in between, and a writer that dies leaves nothing half-done.

Keys (P is the catalog prefix, `ragline:cat:`):
  P kbs                 set of KB ids
  P kbnames             hash "<tenant>\\n<name>" -> KB id (names are unique per tenant)
  P kb:<kb>             hash body (KnowledgeBase JSON), revision, access_revision (bumped when a stored document's rule is set), name, tenant
  P kbdocs:<kb>         set of document ids;  P kbsrc:<kb>  hash source -> document id
  P doc:<id>            hash body (Knowledge JSON), kb, source, rev (the current revision), images and
                        chunks (JSON lists: image handles, chunk ids in written order)
  P rows:<id>:<rev>     hash chunk id -> chunk JSON of one revision (staged with a TTL, immutable once committed)
  P text:<id>:<rev>     the document's source text of that revision (likewise)
  P chunkdoc            hash chunk id -> document id, for the committed revisions only
  P img:<handle>        set of documents whose current chunks show that image
  P restricted:<kb>     hash document id -> its access rule (JSON), for restricted documents only
The scripts name keys they derive from their arguments, which standalone Redis allows (not Cluster).
"""

from __future__ import annotations

# Shared by the scripts that remove a document's committed revision (replace, delete, delete KB).
_DROP = """
local function batched(cmd, key, items)
  for i = 1, #items, 1000 do redis.call(cmd, key, unpack(items, i, math.min(i + 999, #items))) end
end
local function drop_doc(P, kid)
  local dockey = P .. 'doc:' .. kid
  local cur = redis.call('HMGET', dockey, 'rev', 'kb', 'source', 'images')
  if not cur[1] then return end
  local rows = P .. 'rows:' .. kid .. ':' .. cur[1]
  batched('HDEL', P .. 'chunkdoc', redis.call('HKEYS', rows))
  for _, handle in ipairs(cjson.decode(cur[4])) do redis.call('SREM', P .. 'img:' .. handle, kid) end
  redis.call('UNLINK', rows, P .. 'text:' .. kid .. ':' .. cur[1])
  if redis.call('HGET', P .. 'kbsrc:' .. cur[2], cur[3]) == kid then redis.call('HDEL', P .. 'kbsrc:' .. cur[2], cur[3]) end
  redis.call('SREM', P .. 'kbdocs:' .. cur[2], kid)
  redis.call('HDEL', P .. 'restricted:' .. cur[2], kid)
  redis.call('DEL', dockey)
end
"""

# ARGV: prefix, payload {kb, docs: [{id, rev, source, body, images, chunks, access}]}. Checks that every
# staged revision is complete, then swaps all documents in and bumps the KB revision: one step.
COMMIT = _DROP + """
local P, p = ARGV[1], cjson.decode(ARGV[2])
local kbkey = P .. 'kb:' .. p.kb
if redis.call('EXISTS', kbkey) == 0 then return redis.error_reply('ERR knowledge base ' .. p.kb .. ' does not exist') end
for _, d in ipairs(p.docs) do
  local staged = redis.call('EXISTS', P .. 'text:' .. d.id .. ':' .. d.rev) == 1
  if not staged or redis.call('HLEN', P .. 'rows:' .. d.id .. ':' .. d.rev) ~= #d.chunks then
    return redis.error_reply('ERR the staged revision of document ' .. d.id .. ' is incomplete or expired')
  end
end
for _, d in ipairs(p.docs) do
  drop_doc(P, d.id)
  local rows, text = P .. 'rows:' .. d.id .. ':' .. d.rev, P .. 'text:' .. d.id .. ':' .. d.rev
  redis.call('PERSIST', rows)
  redis.call('PERSIST', text)
  redis.call('HSET', P .. 'doc:' .. d.id, 'body', d.body, 'kb', p.kb, 'source', d.source, 'rev', d.rev,
             'images', cjson.encode(d.images), 'chunks', cjson.encode(d.chunks))
  redis.call('SADD', P .. 'kbdocs:' .. p.kb, d.id)
  redis.call('HSET', P .. 'kbsrc:' .. p.kb, d.source, d.id)
  if d.access ~= '' then redis.call('HSET', P .. 'restricted:' .. p.kb, d.id, d.access) end
  local pairs_ = {}
  for _, cid in ipairs(d.chunks) do pairs_[#pairs_ + 1] = cid; pairs_[#pairs_ + 1] = d.id end
  batched('HSET', P .. 'chunkdoc', pairs_)
  for _, handle in ipairs(d.images) do redis.call('SADD', P .. 'img:' .. handle, d.id) end
end
return redis.call('HINCRBY', kbkey, 'revision', 1)
"""

# ARGV: prefix, kb id, document ids...
DELETE_DOCS = _DROP + """
local P, kb = ARGV[1], ARGV[2]
for i = 3, #ARGV do drop_doc(P, ARGV[i]) end
if redis.call('EXISTS', P .. 'kb:' .. kb) == 1 then redis.call('HINCRBY', P .. 'kb:' .. kb, 'revision', 1) end
return 1
"""

# ARGV: prefix, kb id
DELETE_KB = _DROP + """
local P, kb = ARGV[1], ARGV[2]
for _, kid in ipairs(redis.call('SMEMBERS', P .. 'kbdocs:' .. kb)) do drop_doc(P, kid) end
local cur = redis.call('HMGET', P .. 'kb:' .. kb, 'tenant', 'name')
if cur[1] then redis.call('HDEL', P .. 'kbnames', cur[1] .. '\\n' .. cur[2]) end
redis.call('DEL', P .. 'kb:' .. kb, P .. 'kbdocs:' .. kb, P .. 'kbsrc:' .. kb, P .. 'restricted:' .. kb)
redis.call('SREM', P .. 'kbs', kb)
return 1
"""

# ARGV: prefix, kb id, tenant, name, body, revision. A taken name is refused, as SQLite's UNIQUE does.
INSERT_KB = """
local P, kb, tenant, name = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
if redis.call('EXISTS', P .. 'kb:' .. kb) == 1 then return redis.error_reply('ERR knowledge base id ' .. kb .. ' exists') end
if redis.call('HSETNX', P .. 'kbnames', tenant .. '\\n' .. name, kb) == 0 then
  return redis.error_reply('ERR knowledge base ' .. name .. ' already exists')
end
redis.call('HSET', P .. 'kb:' .. kb, 'body', ARGV[5], 'revision', ARGV[6], 'tenant', tenant, 'name', name)
redis.call('SADD', P .. 'kbs', kb)
return 1
"""

# ARGV: prefix, kb id, new name, body. The revision is left alone (settings, not content, changed).
UPDATE_KB = """
local P, kb, name = ARGV[1], ARGV[2], ARGV[3]
local cur = redis.call('HMGET', P .. 'kb:' .. kb, 'tenant', 'name')
if not cur[1] then return 0 end
if cur[2] ~= name then
  if redis.call('HSETNX', P .. 'kbnames', cur[1] .. '\\n' .. name, kb) == 0 then
    return redis.error_reply('ERR knowledge base ' .. name .. ' already exists')
  end
  redis.call('HDEL', P .. 'kbnames', cur[1] .. '\\n' .. cur[2])
end
redis.call('HSET', P .. 'kb:' .. kb, 'body', ARGV[4], 'name', name)
return 1
"""

# ARGV: prefix, chunk ids... -> the committed row of each chunk, or false.
GET_CHUNKS = """
local P, out = ARGV[1], {}
for i = 2, #ARGV do
  local row = false
  local kid = redis.call('HGET', P .. 'chunkdoc', ARGV[i])
  if kid then
    local rev = redis.call('HGET', P .. 'doc:' .. kid, 'rev')
    if rev then row = redis.call('HGET', P .. 'rows:' .. kid .. ':' .. rev, ARGV[i]) end
  end
  out[#out + 1] = row
end
return out
"""

# ARGV: prefix, document id, what -> of the document's committed revision: "rows" (chunk JSONs),
# "ids" (its chunk ids as a JSON list, in the order they were written) or "text".
OF_DOCUMENT = """
local P, kid, what = ARGV[1], ARGV[2], ARGV[3]
local rev = redis.call('HGET', P .. 'doc:' .. kid, 'rev')
if not rev then return false end
if what == 'text' then return redis.call('GET', P .. 'text:' .. kid .. ':' .. rev) end
if what == 'ids' then return redis.call('HGET', P .. 'doc:' .. kid, 'chunks') end
return redis.call('HVALS', P .. 'rows:' .. kid .. ':' .. rev)
"""

# ARGV: prefix, document id, the revision the caller read, new body, access ('' when open). 0 when
# the document was replaced (or deleted) since it was read: the caller reads it again.
SET_ACCESS = """
local P, kid = ARGV[1], ARGV[2]
local cur = redis.call('HMGET', P .. 'doc:' .. kid, 'rev', 'kb')
if cur[1] ~= ARGV[3] then return 0 end
redis.call('HSET', P .. 'doc:' .. kid, 'body', ARGV[4])
if ARGV[5] == '' then redis.call('HDEL', P .. 'restricted:' .. cur[2], kid)
else redis.call('HSET', P .. 'restricted:' .. cur[2], kid, ARGV[5]) end
if redis.call('EXISTS', P .. 'kb:' .. cur[2]) == 1 then redis.call('HINCRBY', P .. 'kb:' .. cur[2], 'access_revision', 1) end
return 1
"""
