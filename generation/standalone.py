"""Whether a follow-up question stands on its own, decided without a model call.

A second turn used to call the model to rewrite its question with the conversation (the seed's
query_understand), and on a small local model that call costs more than the answer's own prefill:
its prompt carries the history, and its JSON output is decoded token by token before the search
can start. A follow-up that names its own subject ("How do I reset the rainfall total?") comes
back from the rewrite unchanged ("if it is already clear, repeat it unchanged"), so for it the
call is pure cost: such a turn goes like a first turn (intent from embedded exemplars).

The rule errs towards the rewrite: a question stands on its own only when it
- has no word that points back (pronouns, "there", "the other", "what about ...", "and ...",
  "tell me more"; 它, 这, 那, 其, 该, 上述, "…呢"),
- names a subject of its own (English: content words beyond question words, auxiliaries and
  generic verbs; Chinese: characters beyond question words and particles),
- asks nothing about the previous answer itself (translate, rephrase, shorten, "you said"),
- and is written in English or Chinese, the languages these lists know; anything else is rewritten.
A wrong "needs the rewrite" costs one model call (the behaviour before this rule); a wrong
"stands on its own" searches with a question that lacks its subject, so every doubt is a rewrite.
"""

from __future__ import annotations

import re


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())

# words that point back at the conversation, wherever they stand
_REFERRING = frozenset({
    "it", "its", "it's", "itself", "they", "them", "their", "theirs", "themselves", "they're",
    "this", "that", "these", "those", "he", "him", "his", "she", "her", "hers", "one's",
    "former", "latter", "same", "such", "else", "ones", "another", "previous", "aforementioned",
    "above", "mentioned", "earlier", "again",
})
# words that point back only at the end of a question ("what should I use instead?")
_REFERRING_AT_END = frozenset({"instead", "then", "too", "also", "either", "other", "one", "more", "why", "how", "so"})
# openings of an elliptical follow-up ("and how long ...", "what about a rise?")
_ELLIPTICAL_OPENINGS = (
    "and", "but", "or", "so", "also", "then", "what about", "how about", "what if", "what else", "why not",
    "how come", "really", "same", "ok and", "okay and", "and what", "any other", "the other",
)
# asks about the previous answer itself (the follow_up intent): only the rewrite call knows what it was
_ABOUT_THE_ANSWER = frozenset({
    "translate", "rephrase", "reword", "shorten", "shorter", "simplify", "simpler", "elaborate", "summarize",
    "summarise", "repeat", "continue", "clarify", "expand", "your", "you've", "said", "mentioned", "answer",
    "answered", "reply", "response", "example", "examples",
})
# words that name no subject: question words, auxiliaries, pronouns of the asker, generic verbs and measures
_FUNCTION_WORDS = _words("""
a an the of in on at to for from by with about into over under between through during without within as
and or but if so than then there here what which who whom whose when where why how whether
is are was were be been being am do does did done doing have has had having can could shall should will
would may might must i me my mine we us our you yours please tell give show explain know need want get
make let say mean use used work works take takes last lasts long many much often far big small high low
good bad better best worse more most less least any some all each every no not yes very just only
exactly really kind sort type way thing things something anything stuff lot lots
""")
# English words that only an English question has: a Latin-script question without one is in
# another language, and these lists cannot judge it
_ENGLISH_MARKERS = _words("""
the a an is are was were do does did what which who when where why how can could should will would
of in on to for with and or my i you it its there this that these those much many long often
""")

# Chinese: neutral words hiding a referring character (应该 "should" holds 该), removed first
_ZH_NEUTRAL = ("应该", "尤其", "因此", "如此", "彼此", "其实", "极其", "其中")
_ZH_REFERRING = ("它", "他", "她", "这", "那", "此", "其", "该", "上述", "前者", "后者", "刚才", "之前", "上面",
                 "前面", "同样", "另外", "还有", "也", "又", "再", "呢", "你说", "你的回答", "翻译", "总结一下", "简单点", "详细点")
_ZH_FUNCTION = ("为什么", "多长时间", "什么", "怎么", "怎样", "如何", "多少", "多久", "多长", "多高", "多大", "多远", "哪里",
                "哪个", "哪些", "哪", "谁", "几", "吗", "吧", "啊", "呀", "的", "了", "是", "有", "在", "能", "会", "可以",
                "要", "需要", "用", "我", "你", "请", "问", "一下", "时间", "告诉", "说", "和", "与", "或", "吧")

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
_OTHER_LETTER = re.compile(r"[^\W\d_a-zA-Z\u3400-\u4dbf\u4e00-\u9fff]")  # a letter of another script (é, ж, ا, …)
_WORD = re.compile(r"[a-z0-9]+(?:['’.-][a-z0-9]+)*")


def stands_on_its_own(question: str) -> bool:
    """True when the question can be searched as written, whatever the conversation before it."""
    text = question.strip().lower()
    if not text or _OTHER_LETTER.search(text):
        return False
    if _CJK.search(text):
        return _chinese_stands(text)
    return _english_stands(text)


def _english_stands(text: str) -> bool:
    words = [word.replace("’", "'") for word in _WORD.findall(text)]
    if not words or not any(word in _ENGLISH_MARKERS for word in words):
        return False
    if any(word in _REFERRING or word in _ABOUT_THE_ANSWER for word in words):
        return False
    if not _existential_there_only(words) or words[-1] in _REFERRING_AT_END:
        return False
    opening = " ".join(words[:3])
    if any(opening == phrase or opening.startswith(phrase + " ") for phrase in _ELLIPTICAL_OPENINGS):
        return False
    if any(words[i] == "more" and (i + 1 == len(words) or words[i + 1] != "than") for i in range(len(words))):
        return False  # "tell me more about ..." continues the previous answer; "more than 3 hPa" does not
    subject = [word for word in words if word not in _FUNCTION_WORDS and (len(word) > 2 or word.isdigit())]
    return len(subject) >= 2 or (len(subject) == 1 and len(words) >= 4)


def _existential_there_only(words: list[str]) -> bool:
    """False when "there" points at a place of the conversation ("how many people live there?");
    "is there a reset button?" and "there are two ..." are no reference."""
    for i, word in enumerate(words):
        if word != "there":
            continue
        before = words[i - 1] if i else ""
        after = words[i + 1] if i + 1 < len(words) else ""
        if before not in {"is", "are", "was", "were", "be"} and after not in {"is", "are", "was", "were", "be"}:
            return False
    return True


def _chinese_stands(text: str) -> bool:
    for word in _ZH_NEUTRAL:
        text = text.replace(word, " ")
    if any(word in text for word in _ZH_REFERRING):
        return False
    for word in _ZH_FUNCTION:
        text = text.replace(word, " ")
    return len(_CJK.findall(text)) + len(_WORD.findall(text)) >= 2
