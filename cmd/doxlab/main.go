// Command doxlab measures encrypted DNS and what it costs web browsing.
package main

import (
	"os"

	"github.com/doxlab/doxlab/cmd/doxlab/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr)) }
