from agent.cli.entry import main

main()
