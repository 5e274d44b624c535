package overlay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/nodeplane/nodeplane/ipfamily"
	"github.com/nodeplane/nodeplane/kernel"
)

// DeviceKernel is what the device reconciliation needs: links and
// addresses.
type DeviceKernel interface {
	kernel.Links
	kernel.Addrs
}

// DeviceSpec is the tunnel device a driver wants.
type DeviceSpec struct {
	// Link is the device to create: Name, Kind, the kind's attributes
	// (VXLAN, IPTunnel), MTU (0 keeps what the kernel chose) and MAC (nil
	// keeps what the kernel chose).
	Link kernel.Link
	// Addr is the device's own address, full-length (the tunnel address);
	// invalid for none. Every other address of Family on the device, but
	// link-local ones, is removed.
	Addr netip.Prefix
	// Family is the family of the addresses the device's owner manages.
	Family ipfamily.Family
	// Compatible reports whether an existing link of the right kind can be
	// kept and changed in place; otherwise it is deleted and created
	// again.
	Compatible func(have *kernel.Link) bool
}

// DeviceResult is what EnsureDevice did.
type DeviceResult struct {
	// Link is the device as the kernel reports it at the end.
	Link kernel.Link
	// Created is set when the device was created or re-created: whatever
	// the kernel held on the old one (neighbours, FDB entries, routes) is
	// gone.
	Created bool
	// Writes counts the changes made.
	Writes int
}

// EnsureDevice makes the kernel hold the device spec describes: created
// when missing, re-created when incompatible, and otherwise changed in
// place (MTU, MAC, address, up).
func EnsureDevice(ctx context.Context, k DeviceKernel, spec *DeviceSpec) (DeviceResult, error) {
	var res DeviceResult
	name := spec.Link.Name
	have, err := k.LinkByName(ctx, name)
	switch {
	case errors.Is(err, kernel.ErrNotFound):
		have, err = createDevice(ctx, k, spec, &res)
		if err != nil {
			return res, err
		}
	case err != nil:
		return res, fmt.Errorf("read device %s: %w", name, err)
	case have.Kind != spec.Link.Kind || (spec.Compatible != nil && !spec.Compatible(&have)):
		res.Writes++
		if err := k.DeleteLink(ctx, have.Index); err != nil && !errors.Is(err, kernel.ErrNotFound) {
			return res, fmt.Errorf("delete incompatible device %s: %w", name, err)
		}
		have, err = createDevice(ctx, k, spec, &res)
		if err != nil {
			return res, err
		}
	}
	changed := res.Created
	if m := spec.Link.MTU; m > 0 && have.MTU != m {
		res.Writes++
		if err := k.SetLinkMTU(ctx, have.Index, m); err != nil {
			return res, fmt.Errorf("set MTU of %s to %d: %w", name, m, err)
		}
		changed = true
	}
	if mac := spec.Link.MAC; len(mac) > 0 && !bytes.Equal(have.MAC, mac) {
		res.Writes++
		if err := k.SetLinkMAC(ctx, have.Index, mac); err != nil {
			return res, fmt.Errorf("set MAC of %s to %s: %w", name, mac, err)
		}
		changed = true
	}
	n, err := syncAddrs(ctx, k, have.Index, name, spec.Family, spec.Addr)
	res.Writes += n
	if err != nil {
		return res, err
	}
	if !have.AdminUp {
		res.Writes++
		if err := k.SetLinkUp(ctx, have.Index, true); err != nil {
			return res, fmt.Errorf("set %s up: %w", name, err)
		}
		changed = true
	}
	if changed {
		if have, err = k.LinkByName(ctx, name); err != nil {
			return res, fmt.Errorf("read device %s: %w", name, err)
		}
	}
	res.Link = have
	return res, nil
}

// createDevice adds the device; one that appeared meanwhile (the kernel
// creates tunl0 with the ipip module) is adopted when compatible.
func createDevice(ctx context.Context, k DeviceKernel, spec *DeviceSpec, res *DeviceResult) (kernel.Link, error) {
	res.Writes++
	l, err := k.AddLink(ctx, spec.Link)
	if errors.Is(err, kernel.ErrExists) {
		l, err = k.LinkByName(ctx, spec.Link.Name)
		if err == nil && (l.Kind != spec.Link.Kind || (spec.Compatible != nil && !spec.Compatible(&l))) {
			return l, fmt.Errorf("create device %s: a %s link of that name is in the way", spec.Link.Name, l.Kind)
		}
	}
	if err != nil {
		return l, fmt.Errorf("create device %s: %w", spec.Link.Name, err)
	}
	res.Created = true
	return l, nil
}

// syncAddrs makes want (if valid) the one address of family on the
// interface, link-local ones aside, adding it before removing the others.
func syncAddrs(ctx context.Context, k DeviceKernel, index int, name string, family ipfamily.Family, want netip.Prefix) (int, error) {
	if !family.Valid() {
		return 0, nil
	}
	addrs, err := k.Addrs(ctx, family)
	if err != nil {
		return 0, fmt.Errorf("list addresses: %w", err)
	}
	writes, found := 0, false
	var extra []netip.Prefix
	for _, a := range addrs {
		if a.LinkIndex != index || a.Prefix.Addr().IsLinkLocalUnicast() {
			continue
		}
		if a.Prefix == want {
			found = true
		} else {
			extra = append(extra, a.Prefix)
		}
	}
	if want.IsValid() && !found {
		writes++
		if err := k.AddAddr(ctx, kernel.Addr{LinkIndex: index, Prefix: want}); err != nil && !errors.Is(err, kernel.ErrExists) {
			return writes, fmt.Errorf("add address %s to %s: %w", want, name, err)
		}
	}
	for _, p := range extra {
		writes++
		if err := k.DeleteAddr(ctx, kernel.Addr{LinkIndex: index, Prefix: p}); err != nil && !errors.Is(err, kernel.ErrNotFound) {
			return writes, fmt.Errorf("remove address %s from %s: %w", p, name, err)
		}
	}
	return writes, nil
}

// RemoveDevice deletes the device called name, if there is one. A device
// the kernel will not delete (the fallback tunl0 of the ipip module) is
// kept, emptied of its addresses of family instead: undeletable says
// whether have is one.
func RemoveDevice(ctx context.Context, k DeviceKernel, name string, family ipfamily.Family, undeletable func(have *kernel.Link) bool) (int, error) {
	have, err := k.LinkByName(ctx, name)
	if errors.Is(err, kernel.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read device %s: %w", name, err)
	}
	if undeletable != nil && undeletable(&have) {
		return syncAddrs(ctx, k, have.Index, name, family, netip.Prefix{})
	}
	if err := k.DeleteLink(ctx, have.Index); err != nil && !errors.Is(err, kernel.ErrNotFound) {
		return 1, fmt.Errorf("delete device %s: %w", name, err)
	}
	return 1, nil
}
