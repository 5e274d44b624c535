//go:build linux

// Command bench runs nodeplane's side-by-side benchmarks (ours against the
// naive peer and the hand-written floor, each trial in a fresh network
// namespace) and prints a table of median ratios, and optionally JSON.
// It needs root.
//
//	go run -C bench .                   # every scenario
//	go run -C bench . -run 'ipsets/'    # scenarios matching a regexp
//	go run -C bench . -trials 5 -json out.json
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"regexp"

	"github.com/nodeplane/nodeplane/bench/internal/harness"
	_ "github.com/nodeplane/nodeplane/bench/scenarios"
)

func main() {
	run := flag.String("run", "", "run only scenarios whose name matches this regexp")
	trials := flag.Int("trials", 3, "trials per variant (medians are reported)")
	jsonPath := flag.String("json", "", "also write the results as JSON to this file")
	list := flag.Bool("list", false, "list the scenarios and exit")
	verbose := flag.Bool("v", false, "print every trial")
	flag.Parse()

	var filter *regexp.Regexp
	if *run != "" {
		var err error
		if filter, err = regexp.Compile(*run); err != nil {
			fmt.Fprintln(os.Stderr, "bench: -run:", err)
			os.Exit(2)
		}
	}
	scenarios := harness.Registered(filter)
	if *list {
		for _, s := range scenarios {
			fmt.Println(s.Name)
		}
		return
	}
	if len(scenarios) == 0 {
		fmt.Fprintln(os.Stderr, "bench: no scenario matches")
		os.Exit(2)
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "bench: needs root (each trial runs in a fresh network namespace)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	opts := harness.Options{Trials: *trials}
	if *verbose {
		opts.Progress = os.Stderr
	}
	results := harness.Run(ctx, scenarios, opts)
	if err := harness.WriteTable(os.Stdout, results); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	if *jsonPath != "" {
		f, err := os.Create(*jsonPath)
		if err == nil {
			err = harness.WriteJSON(f, results)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
	}
}
