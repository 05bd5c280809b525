"""`ragline eval --answers` end to end: a tiny BEIR set with answers, the real graph, real local
embeddings, and the scripted model answering from the passages it is shown.

The scripted model reads the contexts in its prompt, so it cites the alias of the passage that
really holds the gold answer (or, on purpose, a wrong one): the report's numbers can only come
out as expected when answer scoring and citation matching both work.
"""

import argparse
import json
import re
from pathlib import Path

import pytest

from ragline.commands import kb as kb_cli
from ragline.contracts.access import Principal
from ragline.evaluation.answers import EVAL_TENANT, load_qa_set, sample_questions
from tests.api.live import memory_settings
from tests.scripted_model import Reply, last_user_text, system_text

PARAGRAPHS = {
    "p1": ("Aurora sensor", "Pairing the Aurora sensor takes three minutes after holding the blue button."),
    "p2": ("Outdoor battery", "The outdoor unit runs on two AA cells; the battery lasts eighteen months in normal weather."),
    "p3": ("Display", "The colour display shows the temperature in Celsius by default and refreshes every minute."),
    "p4": ("Rain gauge", "The rain gauge tips its bucket into the drain once it holds 0.3 millimetres of water."),
}
QUESTIONS = {
    "q1": ("How long does pairing the Aurora sensor take?", ["three minutes", "3 minutes"], "p1"),
    "q2": ("How long does the outdoor battery last?", ["eighteen months"], "p2"),
    "q3": ("Which unit does the display use by default?", ["Celsius"], "p3"),
    "q4": ("How much water does the rain gauge hold before tipping?", ["0.3 millimetres"], "p4"),
}
# What the scripted model says, with {gold} / {other} replaced by the aliases it was shown.
SCRIPT = {
    "q1": 'three minutes <ref id="{gold}"/>',  # exact, cites the gold passage
    "q2": 'It lasts about eighteen months <ref id="{gold}"/> <ref id="{other}"/>',  # contains gold, one of two cites right
    "q3": "Fahrenheit",  # wrong, no citation
    "q4": 'I could not find it in the knowledge base <ref id="{other}"/>',  # wrong, cites a passage without the answer
}
_RESULT = re.compile(r'<result id="(c\d+)"[^>]*>\s*(.*?)\s*</result>', re.S)


def write_set(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"_id": i, "title": t, "text": x}) for i, (t, x) in PARAGRAPHS.items()]
    (folder / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, (t, _, _) in QUESTIONS.items()))
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, (_, _, d) in QUESTIONS.items()))
    (folder / "answers.jsonl").write_text("".join(json.dumps({"_id": q, "answers": a}) + "\n" for q, (_, a, _) in QUESTIONS.items()))
    return folder


def scripted_reply(body: dict) -> Reply:
    """Rewrite: the question as is. Answer: SCRIPT with the aliases of the passages in the prompt."""
    prompt = last_user_text(body)
    qid = next((q for q, (text, _, _) in QUESTIONS.items() if text in prompt), None)
    if qid is None:
        return Reply.text("scripted answer")
    text, golds, _ = QUESTIONS[qid]
    if "rewrite_query" in system_text(body):
        return Reply.text(json.dumps({"rewrite_query": text, "intent": "kb_search"}))
    passages = _RESULT.findall(prompt)
    if not passages:  # nothing retrieved: the model is not asked with contexts
        return Reply.text("no contexts")
    gold = next(alias for alias, content in passages if golds[0].split()[-1] in content)
    other = next(alias for alias, _ in passages if alias != gold)
    return Reply.text(SCRIPT[qid].format(gold=gold, other=other))


@pytest.fixture
def run(stack, scripted_model, monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(scripted_model, "_reply_for", scripted_reply)
    # every hit reaches the model, so the script can cite a wrong passage on purpose (the relevance
    # gate itself is tested in tests/retrieval/test_relevance.py and tests/test_rag_end_to_end.py)
    monkeypatch.setattr("ragline.retrieval.targets.relevant", lambda query, results: list(results))
    settings = memory_settings(scripted_model)
    monkeypatch.setattr(kb_cli.Services, "from_settings", classmethod(lambda cls, s=None: cls(settings, retrieval_factory=lambda: stack)))
    monkeypatch.chdir(tmp_path)

    def invoke(*argv: str) -> tuple[int, str, str]:
        parser = argparse.ArgumentParser(prog="ragline")
        kb_cli.register(parser.add_subparsers(dest="command", required=True))
        args = parser.parse_args(["eval", "--answers", *argv])
        code = args.func(args)
        out, err = capsys.readouterr()
        return code, out, err

    return invoke


def test_the_report_scores_what_the_model_said_and_the_passages_it_cited(run, stack, tmp_path):
    data = write_set(tmp_path / "tiny_qa")
    code, out, err = run(str(data), "--limit", "4", "--seed", "7", "--output", str(tmp_path / "report.json"))
    assert code == 0, err
    report = json.loads((tmp_path / "report.json").read_text())
    rows = {row["id"]: row for row in report["questions"]}
    assert set(rows) == set(QUESTIONS)

    assert rows["q1"]["exact_match"] and rows["q1"]["f1"] == 1.0 and rows["q1"]["answer_text"] == "three minutes"
    assert [c["contains_gold"] for c in rows["q1"]["citations"]] == [True]
    assert not rows["q2"]["exact_match"] and rows["q2"]["contains_gold"]
    assert rows["q2"]["f1"] == pytest.approx(2 * (2 / 5) / (1 + 2 / 5), abs=1e-4)  # it lasts about eighteen months
    assert [c["contains_gold"] for c in rows["q2"]["citations"]] == [True, False]
    assert rows["q3"]["f1"] == 0.0 and rows["q3"]["citations"] == []
    assert rows["q4"]["citation_precision"] == 0.0
    assert all(row["gold_retrieved"] and not row["fallback"] and row["error"] is None for row in rows.values())
    assert all(row["first_token_s"] <= row["complete_s"] for row in rows.values())

    metrics = report["metrics"]
    assert metrics["exact_match"] == 0.25 and metrics["contains_gold"] == 0.5
    assert metrics["f1"] == pytest.approx((1 + rows["q2"]["f1"] + 0 + rows["q4"]["f1"]) / 4, abs=1e-4)
    assert metrics["citation_precision"] == 0.5  # 2 of the 4 cited passages hold a gold answer
    assert metrics["citation_coverage"] == 0.75  # q3 cites nothing
    assert metrics["citations_model"] == 4 and metrics["citations_attributed"] == 0
    assert metrics["fallback_rate"] == 0.0 and metrics["abstention_rate"] is None
    assert metrics["support_recall"] == 1.0 and all(row["support_recall"] == 1.0 for row in rows.values())
    assert metrics["wrong_with_source"] == 0.25  # q4: no gold in the answer, yet it shows a source (q3 shows none)
    assert report["settings"]["prompt_mode"] == "default" and report["settings"]["seed"] == 7
    assert report["settings"]["model"] == "openai/scripted" and report["settings"]["questions"] == 4
    assert "exact_match" in out and "0.2500" in out
    from ragline.evaluation.report import MEANINGS, SHOWN

    table = {line.split()[0]: line for line in out.splitlines() if line.split() and line.split()[0] in SHOWN}
    assert set(table) == set(SHOWN) and all(table[name].endswith(MEANINGS[name]) for name in SHOWN)  # one line each
    assert "try --short-answers" in table["exact_match"]


def test_short_answers_send_the_short_prompt_and_say_so(run, scripted_model, tmp_path):
    data = write_set(tmp_path / "tiny_qa")
    code, _, err = run(str(data), "--limit", "1", "--short-answers", "--output", str(tmp_path / "short.json"))
    assert code == 0, err
    report = json.loads((tmp_path / "short.json").read_text())
    assert report["settings"]["prompt_mode"] == "short" and "shortest exact phrase" in report["settings"]["system_prompt"]
    answering = [b for b in scripted_model.requests if "<search_results>" in last_user_text(b)]
    assert answering and all("shortest exact phrase" in system_text(b) for b in answering)


def test_abstention_asks_again_without_the_gold_paragraphs_and_counts_fallbacks(run, stack, tmp_path):
    data = write_set(tmp_path / "tiny_qa")
    code, _, err = run(str(data), "--limit", "4", "--abstention", "--output", str(tmp_path / "abstain.json"))
    assert code == 0, err
    report = json.loads((tmp_path / "abstain.json").read_text())
    # every paragraph is some sampled question's gold, so the second base is empty: all fallbacks
    assert all(row["fallback"] and not row["citations"] for row in report["abstention"])
    assert report["metrics"]["abstention_rate"] == 1.0
    names = sorted(kb.name for kb in stack.knowledge_bases.list(Principal.operator_of(EVAL_TENANT)))
    assert len(names) == 2 and report["settings"]["knowledge_base"] in names  # the full base and the one without gold


def test_a_rerun_reuses_the_cached_knowledge_base(run, stack, tmp_path):
    data = write_set(tmp_path / "tiny_qa")
    code, out, _ = run(str(data), "--limit", "1")
    assert code == 0 and (tmp_path / "answers-eval-tiny_qa.json").is_file()  # the default report, in the working directory
    (kb,) = stack.knowledge_bases.list(Principal.operator_of(EVAL_TENANT))
    before = {d.id: d.updated_at for d in stack.catalog.list_knowledge(kb.id)}
    assert run(str(data), "--limit", "1", "--output", str(tmp_path / "b.json"))[0] == 0
    assert [k.id for k in stack.knowledge_bases.list(Principal.operator_of(EVAL_TENANT))] == [kb.id]
    assert {d.id: d.updated_at for d in stack.catalog.list_knowledge(kb.id)} == before


def test_the_baseline_gate_exits_non_zero_when_quality_drops(run, tmp_path):
    data = write_set(tmp_path / "tiny_qa")
    first = tmp_path / "first.json"
    assert run(str(data), "--limit", "4", "--output", str(first))[0] == 0
    code, out, err = run(str(data), "--limit", "4", "--baseline", str(first), "--output", str(tmp_path / "same.json"))
    assert code == 0, err
    assert "against the baseline" in out and "REGRESSED" not in out

    better = json.loads(first.read_text())
    better["metrics"]["f1"] += 0.2
    better["metrics"]["citation_precision"] += 0.005  # within the tolerance
    (tmp_path / "better.json").write_text(json.dumps(better))
    code, out, err = run(str(data), "--limit", "4", "--baseline", str(tmp_path / "better.json"), "--output", str(tmp_path / "now.json"))
    assert code == 3
    assert "f1" in err and "citation_precision" not in err
    assert re.search(r"f1\s.*-0\.2000\s+REGRESSED", out)


def test_a_folder_without_answers_is_a_one_line_error(run, tmp_path):
    data = write_set(tmp_path / "tiny_qa")
    (data / "answers.jsonl").unlink()
    code, _, err = run(str(data))
    assert code == 1 and err.strip().count("\n") == 0 and "answers.jsonl" in err


def test_sampling_is_fixed_by_the_seed(tmp_path):
    qa = load_qa_set(write_set(tmp_path / "tiny_qa"))
    assert sample_questions(qa, 2, seed=3) == sample_questions(qa, 2, seed=3)
    assert {q.id for q in sample_questions(qa, 10, seed=1)} == set(QUESTIONS)


def test_support_recall_is_the_share_of_a_multi_hop_questions_paragraphs_in_the_context():
    from ragline.evaluation.answers import Question, Turn, score_row

    question = Question("m1", "Who founded the city where X was born?", ("Ada",), ("p1", "p2", "p3", "p4"))
    turn = Turn(answer="Ada", references=[{"knowledge_id": "k1"}, {"knowledge_id": "k3"}, {"knowledge_id": "k9"}])
    row = score_row(question, turn, {}, {"k1": "p1", "k3": "p3", "k9": "p9"})
    assert row["gold_retrieved"] and row["support_recall"] == 0.5
