//go:build linux

package wireguard

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/ipc"
	"golang.zx2c4.com/wireguard/tun"

	"github.com/nodeplane/nodeplane/kernel"
)

func (p *userspaceProvider) Open(ctx context.Context, spec DeviceSpec) (Device, error) {
	if p.o.Links == nil || p.o.Doer == nil {
		return nil, fmt.Errorf("%w: userspace provider without Links or Doer", ErrInvalidOptions)
	}
	l, err := p.o.Links.LinkByName(ctx, spec.Name)
	switch {
	case err == nil:
		// A tun device dies with the process that made it: one that
		// exists belongs to a process that still runs.
		return nil, fmt.Errorf("%w: %s exists (a %s link)", ErrForeignDevice, spec.Name, l.Kind)
	case !errors.Is(err, kernel.ErrNotFound):
		return nil, err
	}
	var td tun.Device
	if err := p.o.Doer.Do(func() (err error) {
		td, err = tun.CreateTUN(spec.Name, spec.MTU)
		return err
	}); err != nil {
		return nil, fmt.Errorf("%w: creating the TUN device %s: %w", ErrDevice, spec.Name, err)
	}
	log := p.o.Logger.With("device", spec.Name)
	logger := &device.Logger{Verbosef: device.DiscardLogf, Errorf: device.DiscardLogf}
	if log.Enabled(ctx, slog.LevelDebug) {
		logger.Verbosef = func(f string, a ...any) { log.Debug("wireguard-go: " + fmt.Sprintf(f, a...)) }
	}
	if log.Enabled(ctx, slog.LevelWarn) {
		logger.Errorf = func(f string, a ...any) { log.Warn("wireguard-go: " + fmt.Sprintf(f, a...)) }
	}
	d := &userDevice{name: spec.Name, conns: map[net.Conn]struct{}{}}
	d.dev = device.NewDevice(&nsTUN{Device: td, do: p.o.Doer.Do}, &nsBind{Bind: conn.NewDefaultBind(), do: p.o.Doer.Do}, logger)
	if !p.o.NoControlSocket {
		if err := d.serve(); err != nil {
			d.dev.Close()
			return nil, err
		}
	}
	return d, nil
}

// nsTUN is the TUN device with its MTU query made inside the namespace: the
// query opens a socket and names the interface, which only the namespace
// knows.
type nsTUN struct {
	tun.Device
	do func(func() error) error
}

func (t *nsTUN) MTU() (mtu int, err error) {
	if derr := t.do(func() error {
		mtu, err = t.Device.MTU()
		return nil
	}); derr != nil {
		return 0, derr
	}
	return mtu, err
}

// nsBind opens the device's UDP sockets inside the namespace, whichever
// goroutine brings the device up (the TUN's event reader, usually).
type nsBind struct {
	conn.Bind
	do func(func() error) error
}

func (b *nsBind) Open(port uint16) (fns []conn.ReceiveFunc, actual uint16, err error) {
	if derr := b.do(func() error {
		fns, actual, err = b.Bind.Open(port)
		return nil
	}); derr != nil {
		return nil, 0, derr
	}
	return fns, actual, err
}

type userDevice struct {
	name string
	dev  *device.Device

	mu     sync.Mutex
	closed bool
	uapi   net.Listener
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// serve opens the control socket and answers it.
func (d *userDevice) serve() error {
	f, err := ipc.UAPIOpen(d.name)
	if err != nil {
		return fmt.Errorf("%w: %s: %w (a device of that name in another namespace?)", ErrControlSocket, d.name, err)
	}
	l, err := ipc.UAPIListen(d.name, f)
	_ = f.Close()
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrControlSocket, d.name, err)
	}
	d.uapi = l
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			d.mu.Lock()
			if d.closed {
				d.mu.Unlock()
				_ = c.Close()
				return
			}
			d.conns[c] = struct{}{}
			d.wg.Add(1)
			d.mu.Unlock()
			go func() {
				defer d.wg.Done()
				d.dev.IpcHandle(c)
				d.mu.Lock()
				delete(d.conns, c)
				d.mu.Unlock()
			}()
		}
	}()
	return nil
}

func (d *userDevice) Name() string { return d.name }
func (d *userDevice) Mode() Mode   { return ModeUserspace }

func (d *userDevice) State(context.Context) (DeviceState, error) {
	if d.isClosed() {
		return DeviceState{}, ErrClosed
	}
	var buf bytes.Buffer
	if err := d.dev.IpcGetOperation(&buf); err != nil {
		return DeviceState{}, err
	}
	st, err := parseUAPI(&buf)
	st.Name = d.name
	return st, err
}

func (d *userDevice) Configure(_ context.Context, cfg DeviceConfig) error {
	if d.isClosed() {
		return ErrClosed
	}
	var buf bytes.Buffer
	if err := encodeUAPI(&buf, cfg); err != nil {
		return err
	}
	return d.dev.IpcSetOperation(&buf)
}

func (d *userDevice) isClosed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

// Close stops the control socket and its sessions, then the device: its
// goroutines end, its sockets close and the TUN interface goes.
func (d *userDevice) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	var err error
	if d.uapi != nil {
		err = d.uapi.Close()
	}
	for c := range d.conns {
		_ = c.Close()
	}
	d.mu.Unlock()
	d.wg.Wait()
	d.dev.Close()
	return err
}

func (d *userDevice) Delete(context.Context) error { return d.Close() }
