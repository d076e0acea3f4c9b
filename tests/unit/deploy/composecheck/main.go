// composecheck loads a compose file with compose-go, the library `docker compose` itself
// loads files with (interpolation, YAML merge keys, the Compose Specification's schema, then
// its consistency checks: services, volumes and networks a service names must exist), and
// prints the resolved model as `docker compose config` does. tests/unit/deploy/test_validators.py
// runs it where `docker compose` is missing.
//
//	go run . -f ../../../../deploy/compose/compose.yaml
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/compose-spec/compose-go/v2/cli"
)

func main() {
	file := flag.String("f", "compose.yaml", "compose file")
	flag.Parse()
	ctx := context.Background()
	opts, err := cli.NewProjectOptions([]string{*file}, cli.WithOsEnv, cli.WithConsistency(true))
	if err != nil {
		fail(err)
	}
	project, err := opts.LoadProject(ctx)
	if err != nil {
		fail(err)
	}
	out, err := project.MarshalYAML()
	if err != nil {
		fail(err)
	}
	os.Stdout.Write(out)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "composecheck:", err)
	os.Exit(1)
}
