from polylogue.cli import main

main()
