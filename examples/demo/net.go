package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// run runs a command and returns its combined output; the error quotes it.
func run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// ip runs the ip command.
func ip(ctx context.Context, args ...string) error {
	_, err := run(ctx, "ip", args...)
	return err
}

// inNS runs a command inside the network namespace ns.
func inNS(ctx context.Context, ns string, args ...string) (string, error) {
	return run(ctx, "ip", append([]string{"netns", "exec", ns}, args...)...)
}

// ping sends count echo requests from namespace ns to dst and reports
// whether one came back.
func ping(ctx context.Context, ns string, dst netip.Addr) error {
	_, err := inNS(ctx, ns, "ping", "-n", "-q", "-c", "1", "-W", "1", dst.String())
	return err
}

// eventually retries fn every interval until it succeeds or timeout passes.
func eventually(ctx context.Context, timeout time.Duration, fn func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := fn()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still failing after %v: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// txPackets returns the transmitted-packet counter of a link in ns.
func txPackets(ctx context.Context, ns, link string) (uint64, error) {
	out, err := run(ctx, "ip", "-n", ns, "-j", "-s", "link", "show", "dev", link)
	if err != nil {
		return 0, err
	}
	var links []struct {
		Stats64 struct {
			TX struct {
				Packets uint64 `json:"packets"`
			} `json:"tx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal([]byte(out), &links); err != nil || len(links) != 1 {
		return 0, fmt.Errorf("link %s in %s: cannot read counters: %v", link, ns, err)
	}
	return links[0].Stats64.TX.Packets, nil
}

// routes returns the routes of the main table in ns to exactly dst.
func routes(ctx context.Context, ns string, dst netip.Prefix) ([]string, error) {
	out, err := run(ctx, "ip", "-n", ns, "route", "show", "exact", dst.String())
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	return lines, nil
}

var pingSummary = regexp.MustCompile(`(\d+) packets transmitted, (\d+) (?:packets )?received`)

// pingLoss parses ping's summary line.
func pingLoss(out string) (sent, lost int, err error) {
	m := pingSummary.FindStringSubmatch(out)
	if m == nil {
		return 0, 0, fmt.Errorf("no summary in ping's output: %q", out)
	}
	s, _ := strconv.Atoi(m[1])
	r, _ := strconv.Atoi(m[2])
	return s, s - r, nil
}

// procStats returns a process's resident memory (bytes) and CPU time.
func procStats(pid int) (rss uint64, cpu time.Duration, err error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, l := range strings.Split(string(status), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			rss = kb * 1024
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// Fields after the command name (which may hold spaces) in ")".
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: too short", pid)
	}
	ut, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	const clockTicks = 100 // USER_HZ on Linux
	return rss, time.Duration(ut+st) * time.Second / clockTicks, nil
}
