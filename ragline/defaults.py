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
QUERY_UNDERSTAND_MAX_TOKENS = 512  # rewrite + intent JSON is short
QUERY_UNDERSTAND_IMAGE_MAX_TOKENS = 2048  # image rounds must fit the full OCR text

# --- generation (chat_completion_stream.go) ---
TRUNCATION_FINISH_REASONS = frozenset({"length", "max_tokens", "max_output_tokens"})

# --- rerank (rerank.go) ---
RERANK_FALLBACK_MIN_SCORE = 0.15  # top-1 kept as a fallback when everything is below threshold
RERANK_RETRY_FACTOR = 0.7  # one retry at threshold*0.7 when nothing passes
RERANK_RETRY_FLOOR = 0.3  # ...never below 0.3
RERANK_MAX_CANDIDATES = 200  # passages sent to the rerank model at most
RERANK_TIMEOUT_S = 60.0  # a slower rerank call falls back to search scores
COMPOSITE_MODEL_WEIGHT = 0.6  # composite = 0.6*model + 0.3*base + 0.1*source
COMPOSITE_BASE_WEIGHT = 0.3
COMPOSITE_SOURCE_WEIGHT = 0.1
WEB_SOURCE_WEIGHT = 0.95  # web pages are slightly less trusted than the knowledge base
MMR_LAMBDA = 0.7  # relevance vs. diversity
MEMORY_AFFINITY_MIN_CITATIONS = 2  # documents cited at least twice before get a nudge
MEMORY_AFFINITY_MAX_FACTOR = 1.15  # ...of at most 15%, only to break near-ties
WIKI_BOOST_FACTOR = 1.3  # wiki pages are LLM-synthesised knowledge, preferred to raw chunks

# --- streaming (stream/*.go) ---
STREAM_TTL_S = 3600  # Redis event streams expire an hour after their last event
TITLE_WAIT_AFTER_COMPLETE_S = 3.0  # SSE waits this long for a new session's title
