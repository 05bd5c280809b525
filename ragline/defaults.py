"""Every number the seed names, in one place, each with the reason it has that value.

Nodes and services import these; none hides a magic number of its own.
"""

# --- retrieval (knowledgebase_search*.go) ---
DEFAULT_RETRIEVAL_TOP_K = 50  # match count used when a caller sends <= 0
MAX_RETRIEVAL_POOL_SIZE = 500  # cap on oversampling so one query never scans the world
OVERSAMPLE_FACTOR = 5  # candidates fetched per requested match before fusion
MIN_OVERSAMPLE = 50  # lower bound of the per-KB candidate pool
MAX_CONCURRENT_STORE_GROUPS = 4  # fan-out width across vector store groups
STORE_GROUP_TIMEOUT_S = 30.0  # MULTI_STORE_RETRIEVE_TIMEOUT_SEC: one slow store fails the search
RRF_K = 60  # classic reciprocal-rank-fusion constant
RRF_VECTOR_WEIGHT = 0.7  # vector ranks dominate fusion
RRF_KEYWORD_WEIGHT = 0.3  # keyword ranks break ties and catch exact terms
FAQ_MAX_DEEPENING_ROUNDS = 5  # iterative FAQ deepening: at most 5 doublings of top-k
ZSCORE_VECTOR_WEIGHT = 0.6  # z-score fusion (ours, measured best on the shared sets): vectors lead...
ZSCORE_KEYWORD_WEIGHT = 0.4  # ...and keywords weigh more than in RRF, since z-scores keep their margins
# e5-small's similarities within one pool differ by hundredths (std 0.010-0.024 at the median of every set
# here); a deviation below this is noise, so it is not stretched into z-scores of 2-3. With it, the
# answering passage is in hybrid's top 3 for 22/22 real-document questions (keyword 22, vector 17, without
# it 21) and 97/100 MuSiQue ones (vector 96, without it 95); benchmarks/retrieval_quality.py, real_documents.py.
ZSCORE_VECTOR_STD_FLOOR = 0.02
BM25_K1 = 1.5  # term-frequency saturation; best or level on all three shared sets (1.2 lost 0.005 on Cranfield)
BM25_B = 0.75  # length normalisation (Lucene default)
HNSW_EF_SEARCH = 200  # Chroma HNSW search breadth: high enough to be near-exact at our sizes
HNSW_MAX_NEIGHBORS = 32  # Chroma HNSW M of new collections (Chroma's 16 lost rows here)
HNSW_EF_CONSTRUCTION = 200  # HNSW build breadth of Chroma collections and Redis vector indexes alike
CATALOG_STAGING_TTL_S = 24 * 3600  # Redis catalog: rows staged by a writer that died before its commit expire after a day
FEEDBACK_DOCS = 3  # fused hits whose vectors refine the query vector (Rocchio; 0 turns it off)
FEEDBACK_WEIGHT = 0.5  # Rocchio beta: the weight of those hits' mean vector

# --- relevance: does the knowledge base hold the answer? (retrieval/relevance.py) ---
RELEVANCE_MIN_SCORE = 0.60  # idf-weighted term coverage + 3x similarity above the hits' median; measured in relevance.py
RELEVANCE_TERMS_PER_PASSAGE = 5  # a question with more content terms is judged on a share of 5 terms' weight (multi-hop: one passage holds one hop)
RELEVANCE_KEEP_SHARE = 0.5  # once the best hit passes, hits at half its bar stay: lexical evidence misses paraphrases
RELEVANCE_MIN_PART_TERMS = 2  # a part of a several-part question is judged alone only with this many content terms
RELEVANCE_VARIANT_MIN_LETTERS = 5  # a Latin stem this long that begins another is its variant ("accur", "accuraci")
RELEVANCE_MIN_POOL = 3  # below this many hits the idf of a term says nothing: all terms weigh 1
RELEVANCE_JOINT_HITS = 3  # the best hit scores at least what the 3 best hold together (multi-hop: hops in different passages)
RELEVANCE_JOINT_WEIGHT = 0.8  # ... at 0.8 of its share: 1.0 cost XQuAD 13 points of abstention, 0.8 three (retrieval/relevance.py)
RELEVANCE_NAMED_ENTRY_SCORE = 0.60  # the one hit titled by a name the question mentions passes (a bridge question's first hop)
RELEVANCE_SIMILARITY_WEIGHT = 3.0  # 1 lost gold paragraphs on chunked text, 4 let CMRC's wrong paragraphs through
CROSS_SCRIPT_RELEVANCE_SCALE = 11.0  # a question and passage in different scripts pass 0.55 at 0.05 above the hits' median

# --- chunking (the Go system's splitter defaults) ---
CHUNK_SIZE = 512  # characters per chunk
CHUNK_OVERLAP = 80  # characters repeated between neighbours so a sentence is not cut blind
PARENT_CHUNK_SIZE = 4096  # parent chunks give the model wide context...
CHILD_CHUNK_SIZE = 384  # ...while small children keep the vectors precise
CHUNK_ATOM_MAX_FACTOR = 8  # a code block, formula or table row stays whole up to 8x the chunk size (4,096 characters
# at 512); anything longer (a CSV row of 200,000 columns, a line without spaces) is cut like text: no chunk is larger
LOCAL_EMBEDDING_MAX_CHARS = 2048  # the local embedder reads this much of a text: about its 512-token window in English,
# and a bound on the work one text can demand (it ran 75 minutes on one 2.4-million-character chunk)
EMBEDDING_BATCH_SIZE = 32  # texts per embedding call: large enough to amortise a remote round trip
LOCAL_EMBEDDING_PASSAGE_SLICE = 4  # passages the local embedder encodes in one call: a cancelled ingestion stops after one

# --- request defaults (PipelineRequest) ---
DEFAULT_VECTOR_THRESHOLD = 0.5  # cosine similarity below which a vector hit is noise
DEFAULT_KEYWORD_THRESHOLD = 0.3  # normalised BM25 score below which a keyword hit is noise
DEFAULT_EMBEDDING_TOP_K = 10  # hits per search before rerank
DEFAULT_RERANK_TOP_K = 5  # passages that reach the model
DEFAULT_RERANK_THRESHOLD = 0.3  # rerank score a passage must reach
DEFAULT_HISTORY_ROUNDS = 5  # question/answer pairs replayed to the model
DEFAULT_WEB_FETCH_TOP_N = 3  # web pages fetched in full after rerank
DEFAULT_FAQ_DIRECT_ANSWER_THRESHOLD = 0.9  # FAQ score marking a context as an exact match
DEFAULT_FAQ_SCORE_BOOST = 1.2  # multiplier for FAQ hits when FAQ priority is on

# --- history (load_history.go / common.go) ---
HISTORY_FETCH_SLACK = 10  # messages fetched beyond max_rounds*2 to survive unpaired turns

# --- query understanding (query_understand.go) ---
QUOTED_CONTEXT_MAX_CHARS = 4000  # of an earlier answer a question quotes: a passage, not the whole answer again
QUERY_UNDERSTAND_MAX_TOKENS = 128  # rewrite + intent JSON is ~20 tokens plus the question; a looping small model stops here, not at 512
QUERY_UNDERSTAND_IMAGE_MAX_TOKENS = 2048  # image rounds must fit the full OCR text
INTENT_EXEMPLAR_MARGIN = 0.03  # small talk must beat every question exemplar by this much (e5 scores bunch up)
INTENT_EXEMPLAR_MIN_SCORE = 0.85  # ...and be this close to a small-talk exemplar; below, the question is searched
REWRITE_HISTORY_TOKENS = 200  # of the conversation a rewrite reads: the rounds a follow-up refers to, newest first (ours)
REWRITE_ANSWER_TOKENS = 80  # of each earlier answer: its first sentences name what a pronoun points at (ours)

# --- generation (chat_completion_stream.go) ---
TRUNCATION_FINISH_REASONS = frozenset({"length", "max_tokens", "max_output_tokens"})

# --- attribution (ours: citations for answers whose model wrote no ref tags; citations/attribution.py) ---
# Measured on 50 answer sentences (real local-model answers over the sample KB, plus written ones over
# the sample KB and three XQuAD paragraphs) against 180 sentence/passage pairs, with multilingual-e5-small:
# supported sentences score 0.60-0.96 on their passage; unsupported ones at most 0.52 (one hallucination
# made of a passage's own words reaches 0.82: no lexical measure can catch that one).
ATTRIBUTION_MIN_SCORE = 0.56  # midway in that gap: 0.52 also tags "Pairing fails beyond fifty metres", 0.60 drops a paraphrase
ATTRIBUTION_LEXICAL_WEIGHT = 0.8  # score = 0.8 * share of the sentence's content tokens in the passage + 0.2 * similarity...
ATTRIBUTION_SIMILARITY_FLOOR = 0.75  # ...with the e5 cosine mapped from [0.75, 0.95] onto [0, 1]: e5 scores unrelated
ATTRIBUTION_SIMILARITY_CEILING = 0.95  # text ~0.75 and a passage's own sentence ~0.9; weights 0.5-0.7 missed 1-6 more sentences
ATTRIBUTION_MARGIN = 0.05  # a second passage is cited only this close to the best (without it, 4 of 28 got a wrong extra one)
ATTRIBUTION_MAX_PASSAGES = 2  # sources per sentence at most: more is noise in a footnote
ATTRIBUTION_MIN_CONTENT_TOKENS = 4  # shorter sentences ("I hope this helps.", "1.5 meters") match anything or nothing
ATTRIBUTION_QUOTE_MIN_CHARS = 4  # ...unless copied word for word from a passage: then that passage is its source ("1962", not "2")
OPPOSITE_MIN_SHARE = 0.6  # a passage sentence of opposite polarity says the opposite when it holds this share of the clause's words
ATTRIBUTION_QUOTE_QUESTION_SHARE = 0.5  # ...and that passage holds half the question's content words (musique: quotes from distractors)

# --- rerank (rerank.go) ---
RERANK_FALLBACK_MIN_SCORE = 0.15  # top-1 kept as a fallback when everything is below threshold
RERANK_RETRY_FACTOR = 0.7  # one retry at threshold*0.7 when nothing passes
RERANK_RETRY_FLOOR = 0.3  # ...never below 0.3
RERANK_MAX_CANDIDATES = 200  # passages sent to the rerank model at most
RERANK_TIMEOUT_S = 60.0  # a slower rerank call falls back to search scores
RERANK_PASSAGE_MAX_CHARS = 4000  # one passage of a rerank model whose input limit nobody knows; longer ones are cut from the end
RERANK_CHARS_PER_TOKEN = 3  # tokens -> characters for the rerank limit: below English's ~4, so a cut passage rarely overflows
RERANK_TOKEN_MARGIN = 16  # tokens left for the model's own separators beside query and passage
RERANK_PASSAGE_MIN_CHARS = 200  # a huge query never leaves a passage less than this
COMPOSITE_MODEL_WEIGHT = 0.6  # composite = 0.6*model + 0.3*base + 0.1*source
COMPOSITE_BASE_WEIGHT = 0.3
COMPOSITE_SOURCE_WEIGHT = 0.1
WEB_SOURCE_WEIGHT = 0.95  # web pages are slightly less trusted than the knowledge base
MMR_LAMBDA = 0.7  # relevance vs. diversity
MEMORY_AFFINITY_MIN_CITATIONS = 2  # documents cited at least twice before get a nudge
MEMORY_AFFINITY_MAX_FACTOR = 1.15  # ...of at most 15%, only to break near-ties
MEMORY_AFFINITY_LOG_WEIGHT = 0.05  # factor = 1 + 0.05*log2(citations): 2 -> x1.05, 20 -> x1.15 (the cap)
MEMORY_AFFINITY_MAX_ANSWERS = 1000  # a caller's cited answers read per question: bounded, and enough to show a habit
WIKI_BOOST_FACTOR = 1.3  # wiki pages are LLM-synthesised knowledge, preferred to raw chunks

# --- wiki pages (wiki summaries written at ingestion; ours where the seed gives no number) ---
WIKI_PAGE_INPUT_TOKENS = 3000  # document tokens one page reads, shared evenly by its documents: fits a 4k context with the answer
WIKI_PAGE_MAX_TOKENS = 512  # a page is a summary, not a copy
WIKI_TOPIC_SIMILARITY = 0.88  # documents this similar share a page (e5-small: same product 0.91, unrelated 0.78-0.84)
WIKI_TOPIC_MAX_DOCUMENTS = 4  # documents per page: more would leave each too few input tokens
WIKI_PROFILE_CHARS = 1500  # the start of a document (title + text) is what its topic is compared by
WIKI_BUILD_CONCURRENCY = 2  # pages written at once, across all knowledge bases (2 cores; the chat model is shared with answers)
WIKI_MAX_PAGES = 200  # pages per knowledge base: bounds a rebuild's model calls
WIKI_BUILDING_TTL_S = 30  # shared mode: a rebuild's "building" mark outlives its last renewal (every third of this) by this long

# --- remote model providers (chat, embedding, rerank through litellm) ---
CHAT_TIMEOUT_S = 120.0  # longest silence from a chat provider: to connect, before a reply, between two stream chunks
EMBEDDING_TIMEOUT_S = 30.0  # one batch of embeddings; a query waits on it, so it fails fast
PROVIDER_RETRIES = 2  # a 429, a 5xx or a refused connection is tried again this often (3 calls in all)
PROVIDER_RETRY_BASE_S = 0.5  # backoff before retry n: base*2^n, with jitter in [half, full] so replicas spread out
PROVIDER_RETRY_MAX_S = 8.0  # ...never longer than this
PROVIDER_RETRY_AFTER_MAX_S = 30.0  # a Retry-After longer than this is not waited for: the call fails (and degrades) now

# --- streaming (stream/*.go) ---
STREAM_TTL_S = 3600  # Redis event streams expire an hour after their last event
STREAM_BLOCK_MS = 2000  # one XREAD BLOCK waits this long: well under the socket timeout, so a quiet wait never times out
STREAM_READ_GATHER_S = 0.003  # a process's shared XREAD starts at most this often: each then returns the events of many streams
HEADER_TIMEOUT_S = 15.0  # a client whose request headers take longer is holding a socket, not sending a request
BODY_IDLE_TIMEOUT_S = 30.0  # between two reads of a body: a slow upload goes on while bytes keep coming
REDIS_SOCKET_TIMEOUT_S = 10.0  # a Redis command that has not answered by then failed (a dead server, not a slow one)
REDIS_FULL_SHARE = 0.98  # /health reports Redis full (noeviction) from this share of its maxmemory
REDIS_CONNECT_TIMEOUT_S = 2.0  # connecting to Redis on the local network takes milliseconds
# Conversation messages whose checkpoint encoding a process keeps (checkpoints/redis_json.py): more
# than the messages of all sessions answering at once, or the LRU evicts what the next step needs.
CHECKPOINT_MESSAGE_CACHE = 16384
REDIS_RETRIES = 3  # a dropped connection is retried this often (with backoff) before a request fails with 503
# SSE waits up to this long after `complete` for a new session's title: as long as the title call may
# take (TITLE_TIMEOUT_S), since a quick answer (the fixed "not found") ends before a slow title call.
TITLE_WAIT_AFTER_COMPLETE_S = 30.0

# --- the HTTP service (stream.go, qa.go, session.go) ---
HEALTH_CHECK_TIMEOUT_S = 1.0  # a store slower than this to answer /health counts as down
SSE_HEARTBEAT_S = 15.0  # a comment frame on quiet streams so proxies keep the connection open
SSE_RETRY_MS = 1000  # EventSource reconnect delay announced at the start of every stream
STOP_POLL_S = 0.2  # the stop watcher's period (seed: 300 ms); with STOP_GRACE_S a stop lands within 500 ms
STOP_GRACE_S = 0.3  # after a stop the graph gets this long to end cleanly before its task is cancelled
RUN_MAX_S = 7200.0  # the seed's 2-hour safety timeout of a run and of its stop watcher
# The collector's generation thresholds in a server (service/heap.py). CPython's (700, 10, 10) make a
# full collection of every in-flight run's objects about once a second under load, each a 44-140 ms
# pause of every stream; these make it rare (measured in heap.py's docstring).
GC_THRESHOLDS = (50_000, 20, 10)
RUN_START_SLOTS = 8  # turns that run their stages before the answer streams at once (service/start_slots.py)
RUN_START_HOLD_S = 0.25  # ...each holding its slot at most this long: a turn waiting on a remote model frees it
AT_REST_SESSIONS_MAX = 10_000  # sessions a process remembers as left at rest by its own last turn (service/runs.py)
RUN_LEASE_TTL_S = 5.0  # a dead replica's runs are taken over this long after its last heartbeat
RUN_HEARTBEAT_S = 1.0  # lease renewal period (well under the TTL: two missed beats are tolerated)
RUN_RECOVERY_POLL_S = 1.0  # how often a replica looks for runs whose lease expired
SESSION_PAGE_SIZE = 20  # sessions per page when the client names none
SESSION_MAX_PAGE_SIZE = 100  # ...and at most, so one call never lists a whole tenant
FAQ_WRITE_BATCH = 100  # FAQ entries embedded and stored together by an upsert or import
FAQ_PAGE_SIZE = 100  # FAQ entries per page when the client names none
FAQ_MAX_PAGE_SIZE = 500  # ...and at most: 9,000 entries unpaged were 1.65 MB and held the server for 3 s

# --- conversations as knowledge (message.go IndexMessageToKB / SearchMessages) ---
CHAT_HISTORY_TEXT_MAX_CHARS = 20_000  # of a question or answer indexed; a pasted book is not a conversation
CHAT_HISTORY_DRAWN_ON_MAX = 200  # documents an indexed turn remembers it drew on (a message search checks their rules)
MESSAGE_SEARCH_MAX_QUERY_CHARS = 1000  # a message search is a phrase, not a document
MESSAGE_SEARCH_PAGE_SIZE = 20  # hits per page when the client names none
MESSAGE_SEARCH_MAX_PAGE_SIZE = 100  # ...and at most
MESSAGE_SEARCH_MAX_HITS = 200  # chunks one search ranks: pages reach this far and no further
MESSAGE_PAGE_SIZE = 20  # messages per page when the client names none
MESSAGE_MAX_PAGE_SIZE = 200
SESSION_BATCH_DELETE_MAX = 100  # ids in one batch delete
TITLE_MAX_CHARS = 60  # a generated session title is cut to this length
TITLE_TIMEOUT_S = 30.0  # a title call slower than this falls back to the question's first words
TITLE_MAX_TOKENS = 32  # a title is a few words; the cap stops a rambling model early
UPLOAD_MAX_BYTES = 50 * 1024 * 1024  # one uploaded document at most
DOCUMENT_MAX_TEXT_CHARS = 4_000_000  # text extracted from one document (~2,000 pages); more is refused, never cut silently
DOCUMENT_MAX_CHUNKS = 5_000  # chunks of one document: bounds the embedding work one upload can demand
DOCUMENT_MAX_ROWS = 100_000  # rows of one CSV or sheet set: a table beyond it belongs in a database
DOCUMENT_MAX_PAGES = 2_000  # pages of one PDF
DOCUMENT_TEXT_PAGE_CHARS = 500_000  # characters of a document's text one request returns (a 250-page manual); the rest by offset
LOCATE_SLACK_CHARS = 20_000  # how far past the previous chunk a chunk's text is looked for in its document (bounds the search)
PDF_RUNNING_MIN_PAGES = 3  # fewer pages cannot tell a running header or footer from a line that happens to repeat
PDF_RUNNING_LINES = 2  # a running header or footer is among a page's first or last two lines...
PDF_RUNNING_PAGE_SHARE = 0.6  # ...and recurs there (page numbers aside) on at least 60% of the pages (a title page has none)
PDF_TABLE_MIN_ROWS = 3  # a PDF table: at least a header and two rows of aligned cells (two aligned lines are often prose)
PDF_TABLE_MAX_COLUMNS = 12  # more "cells" in a line is spaced-out text, not a table
PDF_TABLE_CELL_MAX_CHARS = 40  # a longer cell is a column of prose (a two-column page), not a table cell
PDF_TABLE_COLUMN_SLACK = 2  # characters a cell may start (or end) off its column in pypdf's layout text
PARSE_MEMORY_BYTES = 768 * 1024 * 1024  # an upload's parse runs in a child process whose address space may grow this much (ingestion/isolated.py)
ARCHIVE_MAX_UNPACKED_BYTES = 200 * 1024 * 1024  # a .docx/.xlsx unpacking to more than this is a decompression bomb
TEXT_MIN_PRINTABLE_SHARE = 0.95  # a "text" file with more control characters than this is binary, not text

# --- images in documents (seed: image_ocr / image_caption chunks, ImageInfo) ---
IMAGE_MAX_BYTES = 20 * 1024 * 1024  # one image file; a 300 dpi A4 scan as PNG is ~5 MB
IMAGE_MAX_PIXELS = 25_000_000  # checked from the header before decoding (decompression bombs); a 300 dpi A4 page is 8.7 M
IMAGE_MIN_SIDE = 16  # smaller images (icons, bullets, spacers) hold no readable text: not stored, not read
IMAGES_MAX_PER_DOCUMENT = 50  # OCR costs ~0.3-3 s an image on 2 cores; further images are counted, not read
IMAGE_OCR_MAX_CHARS = 4_000  # text read from one image (about a dense page); the rest is cut
IMAGE_OCR_MIN_SCORE = 0.5  # recognised lines below this confidence are noise (rapidocr's own default)
IMAGE_OCR_DECODE_MAX_SIDE = 4096  # OCR decodes a larger image scaled down to this side: a 25 MP image costs 50 MB, not 500 (a 300 dpi A4 page fits whole)
OCR_PROCESS_IDLE_S = 30.0  # the OCR child process exits after this long without an image: its memory goes back (ingestion/ocr_process.py)
OCR_PROCESS_MAX_RSS_BYTES = 512 * 1024 * 1024  # ...and at once after a read that left it larger than this
# the OCR child's address space may grow this much from its start, its engine's included (the parse child's mechanism,
# ingestion/isolated.py); not PARSE_MEMORY_BYTES: a 20 MP page photo needs ~1,000 MB there and fails under 768 MB
OCR_MEMORY_BYTES = 1280 * 1024 * 1024
IMAGE_OCR_DETECT_MAX_SIDE = 960  # the detector sees the image scaled to this longest side: 10x faster than upscaling, same text on screenshots
IMAGE_CAPTION_MAX_TOKENS = 300  # a caption is a paragraph; the cap stops a rambling vision model
IMAGE_CAPTION_MAX_CHARS = 2_000
RERANK_IMAGE_OCR_MIN_CHARS = 200  # seed: an image with this much OCR is text (screenshot, table) and is reranked as text
RERANK_IMAGE_VECTOR_FLOOR = 0.25  # seed: a rejected picture is kept when its vector score reaches max(vector threshold, this)
RERANK_IMAGE_KEEP_MAX = 2  # seed: at most this many pictures kept that way (kept_by=image_vector)
IMAGE_CAPTION_TIMEOUT_S = 60.0  # a vision call slower than this is skipped: OCR alone still indexes the image
CONTEXT_IMAGES_MAX = 3  # seed: retrieved images a vision model sees with one answer
CONTEXT_IMAGE_MAX_BYTES = 5 * 1024 * 1024  # seed: one image sent to a vision model (providers refuse larger ones)
IMAGE_RECALL_DEPTH_FACTOR = 1.5  # seed: a group with image vectors searches 1.5x deeper (images share the vector pool)
IMAGE_RECALL_MAX_THRESHOLD = 0.1  # seed: image hits pass at min(vector threshold, this): text-to-image similarity runs lower
IMAGE_EMBEDDING_BATCH_SIZE = 4  # images per multimodal embedding call: each is a data: URL of up to 5 MB
CONTEXT_IMAGE_MAX_SIDE = 2048  # a larger image re-encoded for a vision model is scaled to this side: providers read no finer
JSON_BODY_MAX_BYTES = 1024 * 1024  # a question with its options is far smaller; uploads use multipart
JSON_MAX_DEPTH = 32  # our bodies nest 4 levels; 32 leaves room and refuses [[[...]]] bombs
JSON_OFF_LOOP_BYTES = 64 * 1024  # larger bodies are parsed in a worker thread, not on the event loop
HEADERS_MAX_COUNT = 100  # browsers send ~20; thousands of headers are an attack
HEADER_MAX_BYTES = 8 * 1024  # one header line, as nginx's large_client_header_buffers
HEADERS_MAX_TOTAL_BYTES = 32 * 1024  # all headers together
RATE_LIMIT_PER_MINUTE = 600  # requests per API key and minute: 10/s sustained, far above a person at a chat page
RATE_LIMIT_BURST = 60  # ...with bursts of this many (a page load fires a handful at once)
MAX_STREAMS_PER_KEY = 20  # answers one API key may stream at once (each holds a connection and a run)
DISCONNECT_POLL_S = 0.5  # how often long request work checks that its client is still there
FILE_NAME_MAX_CHARS = 200  # an uploaded file's name is cut to this (below every filesystem's 255-byte limit)

# --- web search + web_fetch (web_fetch.go, searchutil.ConvertWebSearchResults) ---
WEB_FETCH_MAX_CONTENT_BYTES = 8000  # the seed cuts a fetched page to 8000 bytes of text
WEB_FETCH_TIMEOUT_S = 15.0  # one slow site must not hold up the answer
WEB_FETCH_MAX_DOWNLOAD_BYTES = 2_000_000  # a page body larger than this is cut before parsing
WEB_FETCH_MAX_REDIRECTS = 5  # enough for http->https->www hops, too few for a redirect loop
WEB_SEARCH_TIMEOUT_S = 10.0  # a web search slower than this is dropped; KB search goes on
WEB_RESULT_MIN_RANK_SCORE = 0.5  # providers give no score: rank maps linearly onto [0.5, 1]
WEB_SEARCH_MAX_RESULTS = 5  # web results per question: about what rerank keeps anyway

# --- entity graph (extract_entity.go, search_entity.go) ---
ENTITY_SEARCH_MAX_RESULTS = 30  # chunks an entity search contributes at most
ENTITY_EXTRACT_MAX_TOKENS = 256  # a query's entity list is short
GRAPH_EXTRACT_MAX_TOKENS = 1024  # entities + relationships of one chunk
ENTITY_NODE_MATCH_LIMIT = 20  # graph nodes matched per namespace: enough for a few entities, bounded for common names
ENTITY_RELATION_MATCH_LIMIT = 50  # relations around the matched nodes of one namespace
GRAPH_EXTRACT_CONCURRENCY = 2  # chunks extracted at once at ingestion (2 cores; remote models go faster anyway)
ENTITY_SEARCH_TIMEOUT_S = 10.0  # a slow graph server costs the graph hits, never the answer
ENTITY_GRAPH_LOCK_WAIT_S = 5.0  # DuckDB admits one process at a time: a second waits this long for its turn

# --- data analysis (data_analysis.go) ---
DATA_ANALYSIS_QUERY_TIMEOUT_S = 10.0  # a runaway SQL query is interrupted, the answer goes on
DATA_ANALYSIS_MAX_ROWS = 50  # rows of a query result shown to the model
DATA_ANALYSIS_MAX_TOKENS = 512  # the decision + one SQL statement
DATA_ANALYSIS_SAMPLE_ROWS = 3  # example rows per table in the schema shown to the model
DATA_ANALYSIS_MEMORY_LIMIT = "256MB"  # one analysis must not crowd out the rest of the service

# --- long-term memory (memory_recall.go) ---
MEMORY_RECALL_LIMIT = 5  # memories injected per question
MEMORY_RECALL_TIMEOUT_S = 10.0  # recall that takes longer is skipped; the answer does not wait
MEMORY_RECALL_MARGIN = 0.05  # e5 scores bunch up: only memories this close to the best one are recalled
MEMORY_MIN_SCORE = 0.78  # similarity a memory needs to be recalled (multilingual-e5-small scores unrelated pairs ~0.7)
MEMORY_SCAN_LIMIT = 10_000  # memories read per caller for ranking; far above what one person accrues

# --- local model (llama.cpp) ---
LOCAL_CONTEXT_TOKEN_BUDGET = 250  # passage tokens per answer of the local model: ~1 paragraph; XQuAD F1 by budget (60 q): 180 0.52, 250 0.54, 320 0.48, 400 0.45, none 0.43
CONTEXT_CLOSE_SHARE = 0.5  # past the first passage, one whose gate evidence is under half the best's stays out (unless the question joins facts)
CONTEXT_BUDGET_STRETCH = 2.4  # ...up to 600 tokens for the passages a question needs beyond that paragraph (generation/budget.py)
ANSWER_TEMPERATURE = 0.3  # seed: the answer's sampling temperature when the request sets none
LOCAL_ANSWER_MAX_TOKENS = 512  # a local answer's cap when the request sets none: greedy loops ran to the 4k context
LOCAL_ANSWER_TEMPERATURE = 0.0  # a local model answers greedily unless the request sets a temperature (generation/answer.py chat_options)
LOCAL_CHAT_BATCH = 512  # llama.cpp's default batch; measured against 128 and 256 in the closing note of issue 11
LOCAL_CHAT_CONTEXT = 4096  # tokens: room for the system prompt, the passages, history and a 512-token answer

# --- merge (merge*.go) ---
HISTORY_REF_MIN_OVERLAP = 0.3  # share of the smaller side's words a history reference must cover
HISTORY_REF_SCORE_FACTOR = 0.6  # history references rank below fresh hits
HISTORY_REF_MAX = 3  # at most this many history references are injected
SHORT_CHUNK_CHARS = 350  # text chunks shorter than this get their neighbours' text
EXPANDED_CHUNK_CHARS = 850  # ...up to about this length
PARTIAL_OVERLAP_RATIO = 0.85  # token overlap at which two passages count as near-duplicates
PARTIAL_OVERLAP_SIZE_RATIO = 3.0  # only compared when token counts are within 3x

# --- query expansion (query_expansion.go) ---
QUERY_EXPANSION_MAX_CONCURRENCY = 16  # (variant x target) keyword searches in flight at once
QUERY_EXPANSION_THRESHOLD_FACTOR = 0.8  # variants are noisier than the query, so the keyword threshold relaxes
QUERY_EXPANSION_TOP_K_FACTOR = 2  # variants fetch max(embedding top-k, rerank top-k) * 2 hits
QUERY_EXPANSION_MAX_VARIANTS = 5  # ours, not the seed's: a handful of rewrites bounds the searches per target
QUERY_EXPANSION_MIN_WORD_CHARS = 2  # shorter words (counted in characters) match almost everything

# --- ingestion jobs (service/jobs.py, service/job_queue.py) ---
JOB_WORKERS = 1  # ingestion jobs one process runs at once: parsing, OCR and embedding share 2 cores with chat answers
JOB_TIMEOUT_S = 3600  # one document's job at most (a 2,000-page PDF with OCR); then it fails instead of holding a slot
JOB_HEARTBEAT_S = 30  # a running job touches its queue entry more often than this; silence means its worker died
JOB_STALL_S = 600  # a job embedding or indexing without any progress this long is stuck: its heartbeat stops and another attempt runs
JOB_SWEEP_S = 10  # how often a worker looks for jobs whose worker died (and retries them)
JOB_RETRIES = 3  # attempts of one job across worker deaths; an error in the document itself is never retried
JOB_TTL_S = 7 * 24 * 3600  # a job's status (and its unprocessed upload) is kept a week
JOB_PROGRESS_S = 0.25  # progress is published at most this often: a 5,000-chunk document must not send 5,000 events
JOB_ADMIT_WINDOW = 1  # jobs waiting in the library's FIFO queue; the rest wait in per-tenant queues served round-robin
WORKER_NICE = 10  # `ragline worker` yields the CPU to answers on a shared host (chat p95 under ingestion: 3.0x at nice 0, 1.5-2.2x at 10)

# --- agent mode (graph/agent.py): the loop's limits; reaching one, the model answers with what it has ---
AGENT_MAX_ROUNDS = 5  # model calls that ask for tools in one turn: a multi-hop question needs 2-4 searches
AGENT_MAX_TOOL_CALLS = 10  # tool calls in one turn, all rounds together (a model may ask for several at once)
AGENT_CONTEXT_TOKENS = 16_000  # the loop's prompt budget: what a tool-calling model's window leaves after its answer
AGENT_COMPACT_SHARE = 0.75  # past this share of that budget, the earlier tool rounds are summarised (context_compacted)
AGENT_APPROVAL_TIMEOUT_S = 600.0  # a tool call waiting for the user's approval is denied after this long without a decision
AGENT_READ_CHUNKS_MAX = 20  # chunks read_chunks returns at once: a long document is read in pages, not whole
AGENT_RESULT_SUMMARY_CHARS = 200  # of a tool's output shown in its tool_result event (the model reads all of it)
AGENT_OAUTH_PENDING_TTL_S = 900.0  # an MCP authorization link works this long; a turn waits for it at most agent_approval_timeout_s
AGENT_MCP_TIMEOUT_S = 30.0  # an MCP server's connect, tool listing or one call; slower is the call's error
AGENT_MCP_TOOLS_TTL_S = 60.0  # how long a server's tool list is reused before it is listed again
AGENT_MCP_MAX_TOOLS = 32  # tools taken from one server: each costs prompt tokens every round
AGENT_MCP_SCHEMA_CHARS = 4_000  # a tool's description and argument schema, as JSON; a larger tool is not offered
AGENT_MCP_RESULT_CHARS = 16_000  # of one MCP tool result the model reads; the rest is cut with a note

# agent tools: web, data, entities (nodes/tools/web_search.py, web_fetch.py, data_analysis.py, entity_lookup.py)
AGENT_WEB_QUERY_CHARS = 500  # of a web_search query: a search engine's question, not a paragraph (it leaves the service)
AGENT_WEB_SNIPPET_CHARS = 1_000  # of one web result's snippet: a provider's two or three sentences; a longer one is cut
AGENT_WEB_URL_CHARS = 2_048  # a longer web_fetch URL is refused: a page's address, not a payload
AGENT_SQL_CHARS = 4_000  # of a data_analysis query: one SELECT, not a program
AGENT_DATA_RESULT_CHARS = 8_000  # of a result table or a schema the model reads (DATA_ANALYSIS_MAX_ROWS bounds the rows too)
AGENT_ENTITY_LOOKUP_MAX = 10  # entity names in one entity_lookup call: each is matched in every knowledge base
AGENT_ENTITY_NAME_CHARS = 200  # of one entity name: a name, not a sentence
AGENT_ENTITY_FACTS_CHARS = 4_000  # of the entities and relations listed as text; their chunks come as passages
