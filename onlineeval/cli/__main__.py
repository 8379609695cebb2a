from onlineeval.cli import main

main()
