PYTHON ?= python3
SHARED ?= ../shared/data

.PHONY: install test demo

install:
	$(PYTHON) -m pip install -e ".[test]"

# pytest exits 5 when it collects no test; that is not a pass, but not a
# crash of the suite either, so it is reported and turned into a failure.
test: install
	$(PYTHON) -m pytest -x -q -p no:cacheprovider tests; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; exit 1; fi; exit $$rc
