from spacy_rhetoric.cli import main

if __name__ == "__main__":
    main()
