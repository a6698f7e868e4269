from kernelwright.cli.app import main

main()
