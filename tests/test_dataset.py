"""A user's labelled texts (bam_viz.dataset): the four file formats with string and integer labels,
K from 2 to 50, the class-order rules, every refusal with its message, the seeded stratified dev
split, a --dev-data file read with the training classes, and what the model card records."""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from bam_viz.core.task import MAX_CLASSES
from bam_viz.dataset import (
    SPLIT_RULE,
    DataError,
    Labelled,
    check_dev,
    describe,
    read_labelled,
    split_fingerprint,
    stratified_split,
)

FORMATS = ("csv", "tsv", "jsonl", "parquet")


def write(tmp_path: Path, frame: pd.DataFrame, fmt: str, name: str = "data") -> Path:
    path = tmp_path / f"{name}.{fmt}"
    if fmt == "csv":
        frame.to_csv(path, index=False)
    elif fmt == "tsv":
        frame.to_csv(path, index=False, sep="\t")
    elif fmt == "jsonl":
        frame.to_json(path, orient="records", lines=True, force_ascii=False)
    else:
        frame.to_parquet(path)
    return path


def texts_for(labels) -> list[str]:
    return [f"sentence number {i}, about {label}" for i, label in enumerate(labels)]


def frame_of(labels, **extra) -> pd.DataFrame:
    return pd.DataFrame({"text": texts_for(labels), "label": list(labels), **extra})


def refusal(path: Path, *fragments: str, **kw) -> str:
    with pytest.raises(DataError) as err:
        read_labelled(path, **kw)
    message = str(err.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return message


# ---- reading -----------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS)
def test_string_labels_in_every_format(tmp_path, fmt):
    labels = ["pos", "neg", "neutral", "neg", "pos", "pos"]
    path = write(tmp_path, frame_of(labels), fmt)
    data = read_labelled(path)
    assert data.classes == ("neg", "neutral", "pos")
    assert [data.classes[y] for y in data.labels] == labels
    assert data.texts == tuple(texts_for(labels))
    assert data.rows == (1, 2, 3, 4, 5, 6)
    assert data.source == str(path)
    assert data.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert data.counts() == {"neg": 2, "neutral": 1, "pos": 3}


@pytest.mark.parametrize("fmt", FORMATS)
def test_integer_labels_in_every_format_keep_numeric_order(tmp_path, fmt):
    labels = [10, 2, -1, 2, 9, 10, -1]
    data = read_labelled(write(tmp_path, frame_of(labels), fmt))
    assert data.classes == ("-1", "2", "9", "10")
    assert [int(data.classes[y]) for y in data.labels] == labels


@pytest.mark.parametrize("K", [2, 3, 50])
@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_k_classes(tmp_path, K, fmt):
    labels = [f"class_{i % K:02d}" for i in range(3 * K + 1)]
    data = read_labelled(write(tmp_path, frame_of(labels), fmt))
    assert data.classes == tuple(f"class_{c:02d}" for c in range(K))
    assert data.counts() == {f"class_{c:02d}": 3 + (c == 0) for c in range(K)}
    assert len(data) == 3 * K + 1


def test_named_classes_sort_as_text_and_are_stripped(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("text,label\nfirst,  b \nsecond,a\nthird,B\nfourth,10\nfifth,9\n")
    data = read_labelled(path)
    # code-point order: digits, then capitals, then lower case; "10" before "9" as text
    assert data.classes == ("10", "9", "B", "a", "b")
    assert data.classes[data.labels[0]] == "b"


def test_given_classes_fix_the_order(tmp_path):
    path = write(tmp_path, frame_of(["pos", "neg", "pos"]), "csv")
    data = read_labelled(path, classes=("pos", " neg", "neutral"))
    assert data.classes == ("pos", "neg", "neutral")
    assert data.labels == (0, 1, 0)
    assert data.counts() == {"pos": 2, "neg": 1, "neutral": 0}


def test_given_classes_name_integer_labels(tmp_path):
    data = read_labelled(write(tmp_path, frame_of([0, 1, 2, 1]), "parquet"), classes=["2", "1", "0"])
    assert data.labels == (2, 1, 0, 1)


def test_integer_strings_and_ints_meet_in_one_name(tmp_path):
    """A CSV's "+1" / "01" and a Parquet's 1 are the same class, "1"."""
    path = tmp_path / "d.csv"
    path.write_text("text,label\na,+1\nb,01\nc,-0\nd,0\n")
    data = read_labelled(path)
    assert data.classes == ("0", "1")
    assert data.labels == (1, 1, 0, 0)


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_booleans_are_the_names_false_and_true(tmp_path, fmt):
    data = read_labelled(write(tmp_path, frame_of([True, False, True]), fmt))
    assert data.classes == ("False", "True")
    assert data.labels == (1, 0, 1)


def test_other_column_names_and_case(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("Review, Stars\ngood,5\nbad,1\n")
    data = read_labelled(path, text_column="review", label_column="stars")
    assert data.texts == ("good", "bad")
    assert data.classes == ("1", "5")


def test_texts_are_kept_as_written(tmp_path):
    path = tmp_path / "d.tsv"
    path.write_text('text\tlabel\n  spaced, with a comma  \ta\n"quoted"\tb\n123\tb\n', encoding="utf-8")
    data = read_labelled(path)
    assert data.texts[0] == "  spaced, with a comma  "
    assert data.texts[2] == "123"


def test_blank_lines_are_not_counted_as_rows(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("text,label\na,x\n\nb,y\n,y\n")
    refusal(path, "d.csv", "column 'text'", "row 3", "empty text")


# ---- refusals ----------------------------------------------------------------------------------

def test_missing_columns_are_named_with_the_columns_there_are(tmp_path):
    path = write(tmp_path, pd.DataFrame({"review": ["a", "b"], "label": ["x", "y"]}), "csv")
    refusal(path, "data.csv", "no column 'text'", "'review', 'label'", "--text-column")
    path = write(tmp_path, pd.DataFrame({"text": ["a", "b"], "stars": ["x", "y"]}), "jsonl")
    refusal(path, "data.jsonl", "no column 'label'", "'text', 'stars'", "--label-column")


def test_text_and_label_in_one_column(tmp_path):
    path = write(tmp_path, frame_of(["a", "b"]), "csv")
    refusal(path, "both column 'text'", label_column="text")


def test_no_rows(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("text,label\n")
    refusal(path, "d.csv", "no rows")


def test_missing_file_folder_and_unknown_type(tmp_path):
    refusal(tmp_path / "nowhere.csv", "nowhere.csv", "no such file")
    refusal(tmp_path, "is a folder")
    path = tmp_path / "book.xlsx"
    path.write_bytes(b"PK\x03\x04 not really a workbook")
    refusal(path, "book.xlsx", "unknown file type '.xlsx'", ".csv")


def test_not_utf8(tmp_path):
    path = tmp_path / "latin.csv"
    path.write_bytes("text,label\ncaf\u00e9 au lait,a\nfine,b\n".encode("latin-1"))
    refusal(path, "latin.csv", "not UTF-8", "line 2", "save it as UTF-8")


@pytest.mark.parametrize("fmt", FORMATS)
def test_empty_and_blank_texts(tmp_path, fmt):
    frame = frame_of(["a", "b", "a", "b"])
    frame.loc[1, "text"], frame.loc[3, "text"] = "", "   "
    refusal(write(tmp_path, frame, fmt), f"data.{fmt}", "column 'text'", "empty text in rows 2, 4", "remove the row")


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_numeric_texts(tmp_path, fmt):
    frame = pd.DataFrame({"text": [1.5, 2.0, 3.0], "label": ["a", "b", "a"]})
    refusal(write(tmp_path, frame, fmt), "column 'text'", "not text", "rows 1, 2, 3", "strings", "--text-column")


def test_a_numeric_text_among_strings(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"text": "fine", "label": "a"}\n{"text": 42, "label": "b"}\n')
    refusal(path, "d.jsonl", "not text (42 in row 2)")


@pytest.mark.parametrize("fmt", FORMATS)
def test_missing_labels(tmp_path, fmt):
    frame = pd.DataFrame({"text": ["one", "two", "three", "four"], "label": ["a", None, "b", float("nan")]})
    refusal(write(tmp_path, frame, fmt), f"data.{fmt}", "column 'label'", "no label (empty or NaN) in rows 2, 4")


@pytest.mark.parametrize("cell", ["nan", "NaN", "NA", "n/a", "null", " "])
def test_missing_label_words(tmp_path, cell):
    path = tmp_path / "d.csv"
    path.write_text(f"text,label\none,a\ntwo,{cell}\nthree,b\n")
    refusal(path, "no label", "row 2")


def test_none_is_a_class_name(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("text,label\none,none\ntwo,mild\n")
    assert read_labelled(path).classes == ("mild", "none")


@pytest.mark.parametrize("cell", ["0.5", "1.0", "-2.", ".5", "1e3"])
def test_float_strings(tmp_path, cell):
    path = tmp_path / "d.csv"
    path.write_text(f"text,label\none,1\ntwo,{cell}\nthree,0\n")
    refusal(path, "d.csv", "column 'label'", "labels must be class names or integers", "row 2", "0, 1, 2")


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_float_labels(tmp_path, fmt):
    refusal(write(tmp_path, frame_of([0, 1.5, 1]), fmt), "labels must be class names or integers", "1.5")


def test_a_float_column_of_whole_values(tmp_path):
    path = write(tmp_path, frame_of([0.0, 1.0, 1.0]), "parquet")
    refusal(path, "labels must be class names or integers", "not floats", "rows 1, 2, 3")


def test_labels_that_are_lists(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"text": "a", "label": ["x"]}\n{"text": "b", "label": "y"}\n')
    refusal(path, "labels must be class names or integers", "other values", "row 1")


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_one_class(tmp_path, fmt):
    refusal(write(tmp_path, frame_of(["pos"] * 4), fmt), "one class only ('pos')", "at least two")


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_an_id_column_is_not_labels(tmp_path, fmt):
    frame = pd.DataFrame({"text": [f"text {i}" for i in range(10_000)], "label": [f"id-{i}" for i in range(10_000)]})
    refusal(write(tmp_path, frame, fmt), "10,000 distinct labels", f"limit of {MAX_CLASSES}", "id or free-text",
            "--label-column")


def test_max_classes(tmp_path):
    path = write(tmp_path, frame_of(list(range(5))), "csv")
    assert len(read_labelled(path, max_classes=5).classes) == 5
    refusal(path, "5 distinct labels", "limit of 4", max_classes=4)


def test_labels_outside_the_given_classes(tmp_path):
    path = write(tmp_path, frame_of(["pos", "neg", "meh", "pos", "huh"]), "csv")
    refusal(path, "not among the classes 'neg', 'pos'", "'meh', 'huh'", "rows 3, 5", "--classes",
            classes=("neg", "pos"))


@pytest.mark.parametrize("classes", [("a",), ("a", "a"), ("a", " "), "ab"])
def test_given_classes_must_be_distinct_names(tmp_path, classes):
    path = write(tmp_path, frame_of(["a", "b"]), "csv")
    refusal(path, "--classes", classes=classes)


def test_many_offending_rows_are_cut_short(tmp_path):
    frame = frame_of(["a", "b"] * 10)
    frame.loc[::2, "text"] = ""
    refusal(write(tmp_path, frame, "csv"), "rows 1, 3, 5, 7, 9 and 5 more")


# ---- the labelled texts ------------------------------------------------------------------------

def labelled(labels: list[str], texts: list[str] | None = None, classes: tuple[str, ...] | None = None,
             source: str = "mem.csv") -> Labelled:
    classes = classes or tuple(sorted(set(labels)))
    texts = texts or texts_for(labels)
    return Labelled(tuple(texts), tuple(classes.index(y) for y in labels), classes, source, "0" * 64,
                    tuple(range(1, len(labels) + 1)))


def test_subset_keeps_rows_and_classes():
    data = labelled(["a", "b", "c", "a"])
    part = data.subset([3, 1])
    assert part.texts == (data.texts[3], data.texts[1])
    assert part.rows == (4, 2) and part.labels == (0, 1)
    assert part.classes == data.classes and part.sha256 == data.sha256
    assert part.counts() == {"a": 1, "b": 1, "c": 0}
    with pytest.raises(ValueError, match="0..3"):
        data.subset([4])
    with pytest.raises(ValueError, match="0..3"):
        data.subset([-1])


def test_labelled_checks_itself():
    with pytest.raises(ValueError, match="one label and one row"):
        Labelled(("a", "b"), (0,), ("x", "y"), "f", "", (1, 2))
    with pytest.raises(ValueError, match="indices into the 2 classes"):
        Labelled(("a",), (2,), ("x", "y"), "f", "", (1,))
    with pytest.raises(ValueError, match="repeat"):
        Labelled(("a",), (0,), ("x", "x"), "f", "", (1,))


def test_describe(tmp_path):
    path = write(tmp_path, frame_of(["b", "a", "b"]), "csv")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert describe(read_labelled(path)) == {"source": str(path), "sha256": digest, "rows": 3,
                                             "counts": {"a": 1, "b": 2}}


# ---- the dev split -----------------------------------------------------------------------------

def unbalanced(seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    labels = [c for c, n in (("a", 200), ("b", 37), ("c", 9), ("d", 2), ("e", 3)) for _ in range(n)]
    rng.shuffle(labels)
    return labels


@pytest.mark.parametrize("fraction", [0.01, 0.1, 0.25, 0.5])
def test_split_is_stratified(fraction):
    data = labelled(unbalanced())
    train, dev = stratified_split(data, fraction, seed=3)
    assert sorted(train.rows + dev.rows) == list(data.rows)
    assert not set(train.rows) & set(dev.rows)
    assert list(train.rows) == sorted(train.rows) and list(dev.rows) == sorted(dev.rows)
    for name, n in data.counts().items():
        k = dev.counts()[name]
        assert abs(k - fraction * n) <= 1, (name, n, k)
        assert 1 <= k < n
        assert k + train.counts()[name] == n
    assert dev.classes == train.classes == data.classes


def test_split_is_seeded_and_deterministic():
    data = labelled(unbalanced())
    first = stratified_split(data, 0.2, seed=7)
    assert stratified_split(data, 0.2, seed=7) == first
    other = stratified_split(data, 0.2, seed=8)
    assert other[1].rows != first[1].rows
    assert other[1].counts() == first[1].counts()
    assert split_fingerprint(*first) == split_fingerprint(*stratified_split(data, 0.2, seed=7))
    assert split_fingerprint(*first) != split_fingerprint(*other)


def test_split_does_not_depend_on_the_order_of_the_file(tmp_path):
    labels = unbalanced()
    texts = texts_for(labels)
    texts[5] = texts[9] = texts[11] = "a sentence written three times"   # duplicates, labels may differ
    frame = pd.DataFrame({"text": texts, "label": labels})
    shuffled = frame.sample(frac=1.0, random_state=1)
    assert list(shuffled.index) != list(frame.index)
    sides = []
    for name, table in (("in_order", frame), ("shuffled", shuffled)):
        data = read_labelled(write(tmp_path, table, "csv", name))
        sides.append([Counter(zip(side.texts, (data.classes[y] for y in side.labels), strict=True))
                      for side in stratified_split(data, 0.2, seed=5)])
    assert sides[0] == sides[1]


def test_split_rule_matches_the_hash():
    """The first dev row of a class is the one with the smallest sha256('{seed}:<text>:<n>')."""
    labels = ["a"] * 10 + ["b"] * 10
    data = labelled(labels)
    _, dev = stratified_split(data, 0.1, seed=11)
    for c in ("a", "b"):
        rows = [i for i, y in enumerate(labels) if y == c]
        best = min(rows, key=lambda i: hashlib.sha256(f"11:{data.texts[i]}:0".encode()).hexdigest())
        assert dev.rows[dev.labels.index(data.classes.index(c))] == data.rows[best]
    rule = SPLIT_RULE.format(seed=11, fraction=0.1)
    assert "sha256('11:<text>:<n>')" in rule and "round(0.1 *" in rule


def test_a_class_too_small_to_split():
    data = labelled(["a"] * 10 + ["b"] * 5 + ["c"])
    with pytest.raises(DataError) as err:
        stratified_split(data)
    message = str(err.value)
    assert "mem.csv" in message and "'c' has 1 row" in message and "--dev-data" in message
    assert "'a'" not in message and "'b'" not in message


def test_a_given_class_without_rows_cannot_be_split():
    data = labelled(["a", "a", "b", "b"], classes=("a", "b", "z"))
    with pytest.raises(DataError, match="'z' has 0 rows"):
        stratified_split(data)


@pytest.mark.parametrize("fraction", [0, -0.1, 0.51, 1.0, float("nan"), True, "0.1"])
def test_dev_fraction_bounds(fraction):
    with pytest.raises(ValueError, match="--dev-fraction"):
        stratified_split(labelled(["a", "b"] * 5), fraction)


def test_seed_must_be_an_integer():
    with pytest.raises(ValueError, match="seed"):
        stratified_split(labelled(["a", "b"] * 5), 0.1, seed=1.5)


def test_two_rows_a_class_at_half():
    train, dev = stratified_split(labelled(["a", "b", "a", "b"]), 0.5)
    assert train.counts() == dev.counts() == {"a": 1, "b": 1}


# ---- a dev file --------------------------------------------------------------------------------

def test_dev_file_read_with_the_training_classes(tmp_path):
    train = read_labelled(write(tmp_path, frame_of(["pos", "neg", "neutral", "pos"]), "parquet", "train"))
    dev = read_labelled(write(tmp_path, pd.DataFrame({"text": ["x", "y"], "label": ["pos", "pos"]}), "csv", "dev"),
                        classes=train.classes)
    assert dev.classes == train.classes and dev.labels == (2, 2)
    notes = check_dev(train, dev)
    assert len(notes) == 2
    assert all("dev.csv" in n for n in notes)
    assert "'neg'" in notes[0] and "'neutral'" in notes[1]


def test_dev_file_with_unknown_labels(tmp_path):
    train = read_labelled(write(tmp_path, frame_of([0, 1, 2]), "csv", "train"))
    path = write(tmp_path, frame_of([0, 3, 1, 7]), "jsonl", "dev")
    refusal(path, "dev.jsonl", "not among the classes '0', '1', '2'", "'3', '7'", "rows 2, 4", classes=train.classes)


def test_check_dev_notes_shared_texts():
    train = labelled(["a", "b", "a"], texts=["one", "two", "three"])
    dev = labelled(["a", "b", "b"], texts=["three", "four", "one"], source="dev.csv")
    notes = check_dev(train, dev)
    assert notes == [notes[0]] and "2 of 3 dev texts are also training texts (rows 1, 3)" in notes[0]
    assert check_dev(train, labelled(["a", "b"], texts=["five", "six"])) == []


def test_check_dev_refusals():
    train = labelled(["a", "b", "a"])
    with pytest.raises(DataError, match="not the training classes"):
        check_dev(train, labelled(["a", "c"]))
    with pytest.raises(DataError, match="dev set is empty"):
        check_dev(train, train.subset([]))
    with pytest.raises(DataError, match="no training rows of class 'z'"):
        check_dev(labelled(["a", "b"], classes=("a", "b", "z")), labelled(["a", "b"], classes=("a", "b", "z")))


def test_a_split_passes_check_dev():
    train, dev = stratified_split(labelled(unbalanced()), 0.1)
    assert check_dev(train, dev) == []
