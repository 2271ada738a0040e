from autoprof.cli import main

main()
