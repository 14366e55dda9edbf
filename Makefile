PYTHON ?= python3
SHARED ?= ../shared/data

.PHONY: install test demo

install:
	$(PYTHON) -m pip install -e ".[test,ray]"

# pytest exits 5 when it collects no test; that is not a pass, but not a
# crash of the suite either, so it is reported and turned into a failure.
test: install
	$(PYTHON) -m pytest -x -q -p no:cacheprovider tests; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; exit 1; fi; exit $$rc

# The main job: analyse the 42 PSE-I test essays with the shipped pipeline
# (or demo/sample.txt when ../shared/data is not beside the checkout).
PIPELINE ?= pipelines/zh_rhetoric
DEMO_INPUT = $(if $(wildcard $(SHARED)/pse-i/splits.json),$(SHARED)/pse-i --split test,demo/sample.txt)

demo: install
	mkdir -p packages
	$(PYTHON) -m spacy package $(PIPELINE) packages --name rhetoric --version 0.1.0 --force --build none
	$(PYTHON) -m pip install --no-deps --no-build-isolation -q packages/zh_rhetoric-0.1.0
	mkdir -p demo/out
	$(PYTHON) -m spacy_rhetoric analyze $(DEMO_INPUT) --model zh_rhetoric --format jsonl --output demo/out/analysis.jsonl
	$(PYTHON) -m spacy_rhetoric analyze $(DEMO_INPUT) --model zh_rhetoric --format html --output demo/out/report.html
	@echo "wrote demo/out/analysis.jsonl ($$(wc -l < demo/out/analysis.jsonl) records) and demo/out/report.html"
