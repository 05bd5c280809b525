from ragline.retrieval.tokenizer import raw_tokens, split_scripts, tokenize


def test_mixed_chinese_and_latin_split_where_the_script_switches():
    assert split_scripts("iPhone15手机很好") == [("iPhone15", False), ("手机很好", True)]


def test_chinese_runs_are_cut_into_words_not_single_characters():
    tokens = raw_tokens("中华人民共和国成立")
    assert "中华人民共和国" in tokens and "共和国" in tokens
    assert all(len(t) > 1 for t in tokens)


def test_english_words_are_stemmed_and_stop_words_dropped():
    assert tokenize("The wings of the aircraft are flying") == ["wing", "aircraft", "fli"]


def test_chinese_question_particles_are_dropped():
    assert "什么" not in tokenize("长城是什么") and "长城" in tokenize("长城是什么")


def test_punctuation_only_text_has_no_tokens():
    assert tokenize("…!?。，") == []
