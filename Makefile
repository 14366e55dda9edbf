PYTHON ?= python3
SHARED ?= ../shared/data

.PHONY: install-pipeline install install-core test demo

# The serve extra (FastAPI, uvicorn), the generation extra (kenlm, built from
# source with the C++ compiler and CMake, and jiagu) and selenium come with the install. The
# browser tests of `rhetoric serve` also need Chromium, its driver and a CJK
# font: tried with apt-get only where apt-get exists and we are root; when that
# is impossible or fails, the build goes on and those tests skip, saying why.
BROWSER_PACKAGES = chromium chromium-driver fonts-wqy-microhei

# What the main job (make demo: package the pipeline, analyse) needs: the
# package and its core dependencies, nothing else.
install-core:
	$(PYTHON) -m pip install -e .

install:
	$(PYTHON) -m pip install -e ".[test,ray,serve,generation,evaluation,research,vectors]"
	@if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	  echo "installing $(BROWSER_PACKAGES) for the browser tests (apt-get)"; \
	  { DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(BROWSER_PACKAGES) >/dev/null 2>&1 || \
	    { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(BROWSER_PACKAGES) >/dev/null 2>&1; }; } || \
	  echo "could not install $(BROWSER_PACKAGES); the browser tests will skip"; \
	else echo "no Chromium and no root apt-get: the browser tests will skip (apt-get install $(BROWSER_PACKAGES))"; fi
	$(MAKE) install-pipeline

# pytest exits 5 when it collects no test; that is not a pass, but not a
# crash of the suite either, so it is reported and turned into a failure.
test: install
	$(PYTHON) -m pytest -x -q -p no:cacheprovider tests; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; exit 1; fi; exit $$rc

# The main job: analyse the 42 PSE-I test essays with the shipped pipeline
# (or demo/sample.txt when ../shared/data is not beside the checkout).
PIPELINE ?= pipelines/zh_rhetoric
# the package spacy package builds from $(PIPELINE): zh_rhetoric or zh_rhetoric_trf
META = $(PYTHON) -c "import json,sys; print(json.load(open('$(PIPELINE)/meta.json'))[sys.argv[1]])"
DEMO_INPUT = $(if $(wildcard $(SHARED)/pse-i/splits.json),$(SHARED)/pse-i --split test,demo/sample.txt)

# the shipped pipeline as the package users load: spacy.load("zh_rhetoric")
install-pipeline:
	mkdir -p packages
	$(eval NAME := $(shell $(META) name))
	$(eval VERSION := $(shell $(META) version))
	$(PYTHON) -m spacy package $(PIPELINE) packages --name $(NAME) --version $(VERSION) --force --build none
	$(PYTHON) -m pip install --no-deps --no-build-isolation -q packages/zh_$(NAME)-$(VERSION)

demo: install-core install-pipeline
	$(eval NAME := $(shell $(META) name))
	mkdir -p demo/out
	$(PYTHON) -m spacy_rhetoric analyze $(DEMO_INPUT) --model zh_$(NAME) --format jsonl --output demo/out/analysis.jsonl
	$(PYTHON) -m spacy_rhetoric analyze $(DEMO_INPUT) --model zh_$(NAME) --format html --output demo/out/report.html
	@echo "wrote demo/out/analysis.jsonl ($$(wc -l < demo/out/analysis.jsonl) records) and demo/out/report.html"
	@if [ -f $(SHARED)/pse-i/splits.json ]; then $(PYTHON) -m spacy_rhetoric evaluate records demo/out/analysis.jsonl --shared $(SHARED); fi
