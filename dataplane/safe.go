package dataplane

import (
	"context"
	"runtime/debug"
)

// The functions below call into managers, drivers and callbacks and turn a
// panic into a *PanicError, so a faulty component cannot crash the agent.

func panicError(v any) error { return &PanicError{Value: v, Stack: debug.Stack()} }

func safeOnUpdate(m Manager, msg any) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = panicError(v)
		}
	}()
	m.OnUpdate(msg)
	return nil
}

func safeCall(f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = panicError(v)
		}
	}()
	return f()
}

func safeDo(f func()) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = panicError(v)
		}
	}()
	f()
	return nil
}

func safeApply(ctx context.Context, f func(context.Context) (ApplyResult, error)) (res ApplyResult, err error) {
	defer func() {
		if v := recover(); v != nil {
			res, err = ApplyResult{}, panicError(v)
		}
	}()
	return f(ctx)
}

func safePhase(d Driver) (p Phase, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = panicError(v)
		}
	}()
	return d.Phase(), nil
}

func safeName(n Named) (name string, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = panicError(v)
		}
	}()
	return n.Name(), nil
}
