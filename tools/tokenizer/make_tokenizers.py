#!/usr/bin/env python3
"""Trains small byte-level BPE tokenizers with the configuration of real model families.

The real Qwen2 / Llama 3 tokenizer.json files are not shipped here, so this script trains its
own vocabularies on deterministic synthetic text and writes them with exactly the normalizer,
pre-tokenizer, post-processor, decoder, model flags and added-token layout of the real files
(qwen2, llama3), plus one made-up family for the configurations those two leave out (gpt2):

  qwen2   Qwen2 / Qwen2.5 / Qwen3: NFC, Split(regex, \\p{N} single digits) + ByteLevel,
          ByteLevel post-processor and decoder, BPE ignore_merges=false, added tokens after the
          model vocabulary (<|endoftext|> <|im_start|> <|im_end|> special; <think> </think>
          non-special, as in Qwen3).
  llama3  Llama 3: no normalizer, Split(regex, \\p{N}{1,3}) + ByteLevel(trim_offsets=true),
          Sequence[ByteLevel, TemplateProcessing(<|begin_of_text|> $A)] post-processor,
          ByteLevel decoder, BPE ignore_merges=true, the first ten Llama 3 special tokens;
          a few whole pre-tokens are in the vocabulary without merges (see `unreachable`).
  gpt2    GPT-2 / RoBERTa-style, edge cases: Sequence[NFKD, NFC], Split(string "...", Removed)
          + ByteLevel(add_prefix_space=true, use_regex=true), no post-processor, ByteLevel
          decoder; added tokens with lstrip, rstrip, single_word and normalized=true.

qwen2 and llama3 come in two sizes: small (700 ids in all, below the smallest test model
vocabulary, 769) and large (4000 ids, for the oracle check). The large files keep merges in the
legacy "a b" string form of the real files; the small ones use the [a, b] pair form that current
`tokenizers` writes, so both forms are exercised. gpt2 has one size, edge (1500 ids, pairs).

Output: OUT/{qwen2,llama3}-{small,large}/tokenizer.json and OUT/gpt2-edge/tokenizer.json
(default OUT: tests/data/tokenizers).
Byte-identical across runs. Written against tokenizers==0.22.1.
"""

import argparse
import json
import os
import random
import re
import sys
import unicodedata

from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                 r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def _added(content, tid, special, **flags):
    t = {"id": tid, "content": content, "single_word": False, "lstrip": False,
         "rstrip": False, "normalized": False, "special": special}
    t.update(flags)
    return t


def _split(pattern, kind="Regex", behavior="Isolated"):
    return {"type": "Split", "pattern": {kind: pattern}, "behavior": behavior, "invert": False}


def _byte_level(add_prefix_space, trim_offsets, use_regex):
    return {"type": "ByteLevel", "add_prefix_space": add_prefix_space,
            "trim_offsets": trim_offsets, "use_regex": use_regex}


FAMILIES = {
    "qwen2": dict(
        seed=11,
        sizes={"small": 700, "large": 4000},
        normalizer={"type": "NFC"},
        pre_tokenizer=[_split(QWEN2_PATTERN), _byte_level(False, False, False)],
        # (content, special[, other flags])
        added=[("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
               ("<think>", False), ("</think>", False)],
        post_processor=lambda ids: _byte_level(False, False, False),
        decoder=_byte_level(False, False, False),
        model_flags={"continuing_subword_prefix": "", "end_of_word_suffix": "",
                     "ignore_merges": False},
        unreachable=[],
    ),
    "llama3": dict(
        seed=12,
        sizes={"small": 700, "large": 4000},
        normalizer=None,
        pre_tokenizer=[_split(LLAMA3_PATTERN), _byte_level(False, True, False)],
        added=[("<|begin_of_text|>", True), ("<|end_of_text|>", True),
               ("<|reserved_special_token_0|>", True), ("<|reserved_special_token_1|>", True),
               ("<|reserved_special_token_2|>", True), ("<|reserved_special_token_3|>", True),
               ("<|start_header_id|>", True), ("<|end_header_id|>", True),
               ("<|reserved_special_token_4|>", True), ("<|eot_id|>", True)],
        post_processor=lambda ids: {
            "type": "Sequence",
            "processors": [
                _byte_level(True, False, True),
                {
                    "type": "TemplateProcessing",
                    "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                               {"Sequence": {"id": "A", "type_id": 0}}],
                    "pair": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                             {"Sequence": {"id": "A", "type_id": 0}},
                             {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 1}},
                             {"Sequence": {"id": "B", "type_id": 1}}],
                    "special_tokens": {"<|begin_of_text|>": {
                        "id": "<|begin_of_text|>", "ids": [ids["<|begin_of_text|>"]],
                        "tokens": ["<|begin_of_text|>"]}},
                },
            ],
        },
        decoder=_byte_level(True, True, True),
        model_flags={"continuing_subword_prefix": None, "end_of_word_suffix": None,
                     "ignore_merges": True},
        # Llama 3's vocabulary comes from tiktoken ranks, and applying its merges does not reach
        # every token: that is why it sets ignore_merges (a pre-token found whole in the vocab is
        # one token). A trained vocabulary has no such tokens, so these whole pre-tokens are
        # appended without merges; ignore_merges then changes the result for them.
        unreachable=["Internationalization", "こんにちは", "你好", "안녕하세요", "नमस्ते", "😀", "!!!",
                     "...\n", "    \n", "999"],
    ),
    # Not a real model: the configurations the other two leave out, so that the oracle check
    # covers them (GPT-2 / RoBERTa-style ByteLevel with its own regex and a prefix space, a
    # composed normalizer, a Split by a string that drops its matches, no post-processor, and
    # every added-token flag). The test corpus already hits all of them: the token names are
    # among corpus.SPECIAL_TOKENS, "find" is in corpus.WORDS, "ﬁ" in corpus.ACCENTED.
    "gpt2": dict(
        seed=13,
        sizes={"edge": 1500},
        normalizer={"type": "Sequence", "normalizers": [{"type": "NFKD"}, {"type": "NFC"}]},
        # "..." is matched after normalization, so it also removes "…" (NFKC: "...").
        pre_tokenizer=[_split("...", kind="String", behavior="Removed"),
                       _byte_level(True, True, True)],
        added=[("<|endoftext|>", True),
               ("<|im_start|>", True, {"lstrip": True}),
               ("<|im_end|>", True, {"rstrip": True}),
               ("<think>", False, {"single_word": True}),
               # Matched in normalized text, so as "fi": in "first", "ﬁnancial", ...
               ("\ufb01", False, {"normalized": True}),
               # Overlaps "fi". Where "find" is part of a longer word ("finds") its match is
               # dropped whole: "fi" is not tried there.
               ("find", False, {"normalized": True, "single_word": True})],
        post_processor=lambda ids: None,
        decoder=_byte_level(True, True, True),
        model_flags={"continuing_subword_prefix": None, "end_of_word_suffix": None,
                     "ignore_merges": False},
        unreachable=[],
        # (input, decode(encode(input))): each added-token flag and the Split doing its part;
        # every piece between added tokens gets the prefix space.
        probes=[("a <|im_start|> b", " a<|im_start|> b"),
                ("a <|im_end|>  b", " a <|im_end|> b"),
                ("<think> x<think>", "<think> x<think>"),
                ("find ﬁnd finds", "find find finds"),
                ("ﬁrst first", "ﬁ rst ﬁ rst"),
                ("wait... what…", " wait what")],
    ),
}

# A family's sizes give the total ids (model vocabulary + added tokens). Small must stay below
# the smallest test model vocabulary in tests/data (qwen2 fixtures: 769).
SMALL_ID_LIMIT = 769

def _bytes_to_unicode():
    # The GPT-2 byte-to-character table that ByteLevel uses.
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1))
          + list(range(ord("\u00ae"), ord("\u00ff") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


BYTE_TO_UNICODE = _bytes_to_unicode()

# --- Deterministic training text -------------------------------------------------------------

SYLLABLES = ("ka ri to na mo se lu pa di ve ro an en in on un er or ar al el il ol st tr pr "
             "br ch sh th qu ing tion ment ness able ful less ous ive ly ed er est").split()
PREFIXES = ["", "", "", "un", "re", "in", "dis", "pre", "over", "sub", "inter", "multi"]
SUFFIXES = ["", "", "", "s", "ed", "ing", "er", "ly", "tion", "ment", "ness", "able", "ize"]
HANZI = ("的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过"
         "家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本"
         "见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话"
         "模型数据计算语言训练推理向量矩阵张量内核程序代码测试")
KANA = "あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをん"
KATAKANA = "アイウエオカキクケコサシスセソタチツテトナニヌネノハヒフヘホマミムメモラリルレロワン"
HANGUL_SYL = "가나다라마바사아자차카타파하고노도로모보소오조초는을를이가에서의한국어말글"


def _zipf_choice(rng, items):
    # Weights 1/(rank+1), so frequent items produce realistic merge counts.
    n = len(items)
    r = rng.random() * _harmonic(n)
    acc = 0.0
    for i in range(n):
        acc += 1.0 / (i + 1)
        if acc >= r:
            return items[i]
    return items[-1]


_HARMONIC = {}


def _harmonic(n):
    if n not in _HARMONIC:
        _HARMONIC[n] = sum(1.0 / (i + 1) for i in range(n))
    return _HARMONIC[n]


def _lexicon(rng):
    words = list(corpus.WORDS)
    for _ in range(600):
        stem = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 3)))
        words.append(rng.choice(PREFIXES) + stem + rng.choice(SUFFIXES))
    return words


def _english(rng, lex):
    out = []
    for _ in range(rng.randint(2, 8)):
        ws = [_zipf_choice(rng, lex) for _ in range(rng.randint(4, 18))]
        if rng.random() < 0.3:
            i = rng.randrange(len(ws))
            ws[i] = rng.choice(corpus.CONTRACTION_WORDS) + rng.choice(corpus.CONTRACTIONS)
        if rng.random() < 0.2:
            ws.insert(rng.randrange(len(ws)), str(rng.randint(0, 2025)))
        s = " ".join(ws)
        out.append(s[0].upper() + s[1:] + rng.choice([".", ".", ".", ",", "?", "!", ":", ";"]))
    return " ".join(out) + rng.choice(["\n", "\n\n", " ", ""])


def _code(rng, lex):
    ident = lambda: "_".join(_zipf_choice(rng, lex).lower() for _ in range(rng.randint(1, 2)))
    lines = []
    indent = 0
    for _ in range(rng.randint(3, 12)):
        pad = rng.choice(["    ", "  ", "\t"]) * indent
        kind = rng.randrange(6)
        if kind == 0:
            lines.append(f"{pad}def {ident()}({ident()}, {ident()}=None):")
            indent = min(indent + 1, 4)
        elif kind == 1:
            lines.append(f"{pad}{ident()} = {ident()}[{rng.randint(0, 99)}] + {rng.random():.3f}")
        elif kind == 2:
            lines.append(f"{pad}for (int i = 0; i < {ident()}.size(); ++i) {{")
            indent = min(indent + 1, 4)
        elif kind == 3:
            lines.append(f"{pad}return {ident()}({ident()}, \"{_zipf_choice(rng, lex)}\");")
            indent = max(indent - 1, 0)
        elif kind == 4:
            lines.append(f"{pad}# {_english(rng, lex).strip()[:60]}")
        else:
            lines.append(pad + rng.choice(corpus.CODE).rstrip("\n"))
    return rng.choice(["\n", "\r\n"]).join(lines) + "\n"


def _cjk(rng):
    r = rng.random()
    if r < 0.6:
        chars = [_zipf_choice(rng, HANZI) for _ in range(rng.randint(6, 40))]
        punct = ["，", "。", "、", "：", "！"]
    elif r < 0.85:
        chars = [_zipf_choice(rng, KANA + KATAKANA + HANZI[:60]) for _ in range(rng.randint(6, 30))]
        punct = ["、", "。", "「", "」"]
    else:
        chars = [_zipf_choice(rng, HANGUL_SYL) for _ in range(rng.randint(6, 30))]
        punct = [" ", " ", ".", ","]
    for _ in range(len(chars) // 8):
        chars.insert(rng.randrange(len(chars)), rng.choice(punct))
    return "".join(chars) + rng.choice(["\n", "", " "])


def _other(rng):
    pools = [corpus.CYRILLIC, corpus.ACCENTED, corpus.GREEK, corpus.ARABIC, corpus.DEVANAGARI,
             corpus.THAI, corpus.HEBREW, corpus.EMOJI, corpus.PUNCT]
    weights = [6, 8, 2, 2, 2, 2, 1, 4, 2]
    parts = []
    for _ in range(rng.randint(3, 15)):
        parts.append(rng.choice(rng.choices(pools, weights)[0]))
        parts.append(rng.choice([" ", " ", " ", ", ", ". ", "\n"]))
    return "".join(parts)


def _numbers(rng):
    parts = []
    for _ in range(rng.randint(3, 12)):
        k = rng.randrange(5)
        if k == 0:
            parts.append(str(rng.randint(1900, 2030)))
        elif k == 1:
            parts.append(f"${rng.randint(0, 9999)}.{rng.randint(0, 99):02d}")
        elif k == 2:
            parts.append(f"{rng.uniform(-100, 100):.{rng.randint(1, 4)}f}")
        elif k == 3:
            parts.append(f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}")
        else:
            parts.append(str(rng.randint(0, 10 ** rng.randint(1, 9))))
        parts.append(rng.choice([" ", ", ", "\n", " - ", "%", " x "]))
    return "".join(parts)


def training_docs(seed, n_docs=5000):
    rng = random.Random(seed)
    lex = _lexicon(rng)
    kinds = [(lambda: _english(rng, lex), 50), (lambda: _code(rng, lex), 18),
             (lambda: _cjk(rng), 14), (lambda: _other(rng), 10), (lambda: _numbers(rng), 8)]
    fns, weights = zip(*kinds)
    return [rng.choices(fns, weights)[0]() for _ in range(n_docs)]


# --- Building ----------------------------------------------------------------------------------

def _normalizer_object(j):
    if j["type"] == "Sequence":
        return normalizers.Sequence([_normalizer_object(n) for n in j["normalizers"]])
    return getattr(normalizers, j["type"])()  # NFC, NFKC, NFD, NFKD


def _pre_tokenizer_object(items):
    out = []
    for p in items:
        if p["type"] == "Split":
            (kind, pattern), = p["pattern"].items()
            out.append(pre_tokenizers.Split(Regex(pattern) if kind == "Regex" else pattern,
                                            behavior=p["behavior"].lower(), invert=p["invert"]))
        else:
            out.append(pre_tokenizers.ByteLevel(add_prefix_space=p["add_prefix_space"],
                                                trim_offsets=p["trim_offsets"],
                                                use_regex=p["use_regex"]))
    return pre_tokenizers.Sequence(out)


def build(family, size):
    cfg = FAMILIES[family]
    n_added = len(cfg["added"])
    model_vocab = cfg["sizes"][size] - n_added
    trained_vocab = model_vocab - len(cfg["unreachable"])

    tok = Tokenizer(models.BPE(ignore_merges=cfg["model_flags"]["ignore_merges"]))
    if cfg["normalizer"] is not None:
        tok.normalizer = _normalizer_object(cfg["normalizer"])
    tok.pre_tokenizer = _pre_tokenizer_object(cfg["pre_tokenizer"])
    trainer = trainers.BpeTrainer(vocab_size=trained_vocab, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    docs = training_docs(cfg["seed"])
    tok.train_from_iterator(docs, trainer=trainer, length=len(docs))

    # The trainer cannot set the post-processor, decoder, added-token flags or some model fields
    # the way the real files have them: write those into the JSON directly, then reload.
    j = json.loads(tok.to_str())
    model = j["model"]
    vocab = model["vocab"]
    if len(vocab) != trained_vocab:
        raise RuntimeError(f"{family}-{size}: trained {len(vocab)} tokens, wanted {trained_vocab}")
    for word in cfg["unreachable"]:
        token = "".join(BYTE_TO_UNICODE[b] for b in word.encode("utf-8"))
        if token in vocab:
            raise RuntimeError(f"{family}-{size}: {word!r} is already a token")
        vocab[token] = len(vocab)
    # Added tokens live after the model vocabulary, as in the real files.
    ids = {}
    j["added_tokens"] = []
    for i, (content, special, *flags) in enumerate(cfg["added"]):
        # A content the model vocabulary has would keep the model's id on loading.
        if content in vocab:
            raise RuntimeError(f"{family}-{size}: added token {content!r} is a model token")
        ids[content] = model_vocab + i
        j["added_tokens"].append(_added(content, model_vocab + i, special, **(flags or [{}])[0]))
    j["normalizer"] = cfg["normalizer"]
    j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": cfg["pre_tokenizer"]}
    j["post_processor"] = cfg["post_processor"](ids)
    j["decoder"] = cfg["decoder"]
    merges = [m if isinstance(m, list) else m.split(" ") for m in model["merges"]]
    if size == "large":
        merges = [" ".join(m) for m in merges]
    new_model = {"type": "BPE", "dropout": None, "unk_token": None,
                 "continuing_subword_prefix": cfg["model_flags"]["continuing_subword_prefix"],
                 "end_of_word_suffix": cfg["model_flags"]["end_of_word_suffix"],
                 "fuse_unk": False, "byte_fallback": False,
                 "ignore_merges": cfg["model_flags"]["ignore_merges"],
                 "vocab": vocab, "merges": merges}
    j["model"] = new_model
    return j


def check(path, j, family, size):
    """Reloads the written file and checks that `tokenizers` sees the intended configuration."""
    tok = Tokenizer.from_file(path)
    back = json.loads(tok.to_str())
    for key in ("normalizer", "pre_tokenizer", "post_processor", "decoder"):
        if back[key] != j[key]:
            raise RuntimeError(f"{path}: {key} did not round-trip: {back[key]} != {j[key]}")
    for key in ("dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix",
                "fuse_unk", "byte_fallback", "ignore_merges"):
        if back["model"][key] != j["model"][key]:
            raise RuntimeError(f"{path}: model.{key} did not round-trip")
    if back["added_tokens"] != j["added_tokens"]:
        raise RuntimeError(f"{path}: added_tokens did not round-trip")
    total = tok.get_vocab_size(with_added_tokens=True)
    want = FAMILIES[family]["sizes"][size]
    if total != want:
        raise RuntimeError(f"{path}: vocab size {total}, wanted {want}")
    if size == "small" and total > SMALL_ID_LIMIT:
        raise RuntimeError(f"{path}: ids reach {total - 1}, the test models allow < {SMALL_ID_LIMIT}")
    probes = FAMILIES[family].get("probes")
    if probes is not None:
        # Normalization, the prefix space and the Split change the text, so no round trip:
        # fixed inputs whose decode shows that each feature acts.
        for s, want_text in probes:
            text = tok.decode(tok.encode(s).ids, skip_special_tokens=False)
            if text != want_text:
                raise RuntimeError(f"{path}: decode(encode({s!r})) = {text!r}, wanted {want_text!r}")
        return total
    # Encode/decode round trip on a sample of the test corpus.
    for s in corpus.generate(500, seed=7):
        ids = tok.encode(s, add_special_tokens=False).ids
        text = tok.decode(ids, skip_special_tokens=False)
        expect = s if family != "qwen2" else _nfc_outside_added(s, j)
        if text != expect:
            raise RuntimeError(f"{path}: decode(encode(s)) != s for {s!r}")
    return total


def _nfc_outside_added(s, j):
    # Added tokens are matched before normalization (normalized=false), so text around them is
    # normalized piecewise.
    contents = sorted((t["content"] for t in j["added_tokens"]), key=len, reverse=True)
    parts = re.split("(" + "|".join(re.escape(c) for c in contents) + ")", s)
    return "".join(p if p in contents else unicodedata.normalize("NFC", p) for p in parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "data", "tokenizers"))
    args = ap.parse_args()
    for family in FAMILIES:
        for size in FAMILIES[family]["sizes"]:
            j = build(family, size)
            d = os.path.join(args.out, f"{family}-{size}")
            os.makedirs(d, exist_ok=True)
            path = os.path.join(d, "tokenizer.json")
            with open(path, "w", encoding="utf-8", newline="\n") as f:
                f.write(json.dumps(j, indent=2, ensure_ascii=False) + "\n")
            total = check(path, j, family, size)
            print(f"{path}: {total} ids ({len(j['model']['vocab'])} model, "
                  f"{len(j['model']['merges'])} merges, {len(j['added_tokens'])} added), "
                  f"{os.path.getsize(path)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
