//go:build linux

package harness_test

import (
	"context"

	"github.com/nodeplane/nodeplane/bench/internal/harness"
)

// A scenario compares ours with the floor; each trial runs in its own
// namespace, so Run needs root.
func ExampleRegister() {
	harness.Register(harness.Scenario{
		Name: "example/true/1",
		Size: 1,
		Variants: []harness.Variant{
			{Name: "nodeplane", Role: harness.Ours, Run: func(ctx context.Context, env *harness.Env) error {
				_, err := env.NS.Run(ctx, nil, "true")
				return err
			}},
			{Name: "shell", Role: harness.Floor, Run: func(ctx context.Context, env *harness.Env) error {
				_, err := env.NS.Run(ctx, nil, "sh", "-c", "true")
				return err
			}},
		},
	})
}
