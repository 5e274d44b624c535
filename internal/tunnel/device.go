package tunnel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/nodeplane/nodeplane/internal/errs"
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
	// Conflict, when set, says what another link of the namespace takes
	// from the device ("VNI 4096 and UDP port 4789"), or "" when it takes
	// nothing: when the kernel refuses to create the device as existing
	// while no link has its name, the error names each link that does.
	Conflict func(other *kernel.Link) string
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
// place (MTU, MAC, address, up). A link of the device's name but of
// another kind is not the device: it is left alone and the error (wrapping
// kernel.ErrExists) names it; so does the error of a device the kernel
// will not create because another link holds what it needs (spec.Conflict).
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
	case have.Kind != spec.Link.Kind:
		return res, foreignName(spec, &have)
	case spec.Compatible != nil && !spec.Compatible(&have):
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

// foreignName is the error of a link that has the device's name but not its
// kind.
func foreignName(spec *DeviceSpec, have *kernel.Link) error {
	return errs.Also(fmt.Errorf("device %s: the name is taken by a %s link (index %d), which is not ours: left alone; delete it or choose another device name",
		spec.Link.Name, have.Kind, have.Index), kernel.ErrExists)
}

// createDevice adds the device; one that appeared meanwhile (the kernel
// creates tunl0 with the ipip module) is adopted when compatible. When the
// kernel answers that the device exists but no link has its name, another
// link holds what the device needs: the error names it (spec.Conflict).
func createDevice(ctx context.Context, k DeviceKernel, spec *DeviceSpec, res *DeviceResult) (kernel.Link, error) {
	name := spec.Link.Name
	res.Writes++
	l, err := k.AddLink(ctx, spec.Link)
	if errors.Is(err, kernel.ErrExists) {
		have, lerr := k.LinkByName(ctx, name)
		switch {
		case lerr == nil && have.Kind != spec.Link.Kind:
			return kernel.Link{}, foreignName(spec, &have)
		case lerr == nil && spec.Compatible != nil && !spec.Compatible(&have):
			return kernel.Link{}, errs.Also(fmt.Errorf("create device %s: an incompatible %s link of that name (index %d) appeared meanwhile", name, have.Kind, have.Index), kernel.ErrExists)
		case lerr == nil:
			l, err = have, nil
		case errors.Is(lerr, kernel.ErrNotFound):
			return kernel.Link{}, conflictError(ctx, k, spec, err)
		default:
			return kernel.Link{}, fmt.Errorf("read device %s: %w", name, lerr)
		}
	}
	if err != nil {
		return l, fmt.Errorf("create device %s: %w", name, err)
	}
	res.Created = true
	return l, nil
}

// conflictError is the error of a device the kernel refused as existing
// (cause) while no link has its name: it names the links that hold what the
// device needs, as spec.Conflict finds them.
func conflictError(ctx context.Context, k DeviceKernel, spec *DeviceSpec, cause error) error {
	name := spec.Link.Name
	if spec.Conflict == nil {
		return fmt.Errorf("create device %s: %w", name, cause)
	}
	links, err := k.Links(ctx)
	if err != nil {
		return fmt.Errorf("create device %s: %w (and listing the links to find what holds it failed: %v)", name, cause, err)
	}
	var held []string
	for i := range links {
		if what := spec.Conflict(&links[i]); what != "" && links[i].Name != name {
			held = append(held, fmt.Sprintf("%s is held by %s device %s (index %d)", what, links[i].Kind, links[i].Name, links[i].Index))
		}
	}
	if len(held) == 0 {
		return fmt.Errorf("create device %s: %w (no link of that name, and none found holding what it needs)", name, cause)
	}
	return errs.Also(fmt.Errorf("create device %s: %s: %w", name, strings.Join(held, "; "), cause), kernel.ErrExists)
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

// RemoveDevice deletes the device called name, of kind, if there is one;
// a link of that name but of another kind is not the device and is left
// alone. A device the kernel will not delete (the fallback tunl0 of the
// ipip module) is kept, emptied of its addresses of family instead:
// undeletable says whether have is one.
func RemoveDevice(ctx context.Context, k DeviceKernel, name, kind string, family ipfamily.Family, undeletable func(have *kernel.Link) bool) (int, error) {
	have, err := k.LinkByName(ctx, name)
	if errors.Is(err, kernel.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read device %s: %w", name, err)
	}
	if have.Kind != kind {
		return 0, nil
	}
	if undeletable != nil && undeletable(&have) {
		return syncAddrs(ctx, k, have.Index, name, family, netip.Prefix{})
	}
	if err := k.DeleteLink(ctx, have.Index); err != nil && !errors.Is(err, kernel.ErrNotFound) {
		return 1, fmt.Errorf("delete device %s: %w", name, err)
	}
	return 1, nil
}
