package tunnel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/nodeplane/nodeplane/dataplane"
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
	// MACChanged is set when the device's MAC was changed in place: the
	// kernel flushed its neighbour entries (permanent ones too).
	MACChanged bool
	// Writes counts the changes made.
	Writes int
}

// EnsureDevice makes the kernel hold the device spec describes: created
// when missing, re-created when incompatible, and otherwise changed in
// place (MTU, MAC, address, up). A link of the device's name but of
// another kind is not the device: it is left alone and the error (wrapping
// kernel.ErrExists) names it; so does the error of a device the kernel
// will not create because another link holds what it needs (spec.Conflict).
//
// With a non-nil plan it writes nothing: it reads the kernel as it would,
// decides as it would, and appends each write it would make to *plan
// (kind "link"), counting every write a success; res.Link is then the
// device as it would be (Index 0 for one it would create).
func EnsureDevice(ctx context.Context, k DeviceKernel, spec *DeviceSpec, plan *[]dataplane.Write) (DeviceResult, error) {
	var res DeviceResult
	w := writer{k: k, plan: plan, name: spec.Link.Name, res: &res}
	name := spec.Link.Name
	have, err := k.LinkByName(ctx, name)
	switch {
	case errors.Is(err, kernel.ErrNotFound):
		have, err = createDevice(ctx, w, spec)
		if err != nil {
			return res, err
		}
	case err != nil:
		return res, fmt.Errorf("read device %s: %w", name, err)
	case have.Kind != spec.Link.Kind:
		return res, foreignName(spec, &have)
	case spec.Compatible != nil && !spec.Compatible(&have):
		if err := w.do(dataplane.WriteDelete, LinkText(&have), "incompatible, re-created", func() error {
			if err := k.DeleteLink(ctx, have.Index); err != nil && !errors.Is(err, kernel.ErrNotFound) {
				return fmt.Errorf("delete incompatible device %s: %w", name, err)
			}
			return nil
		}); err != nil {
			return res, err
		}
		have, err = createDevice(ctx, w, spec)
		if err != nil {
			return res, err
		}
	}
	changed := res.Created
	if m := spec.Link.MTU; m > 0 && have.MTU != m {
		if err := w.do(dataplane.WriteReplace, name+" mtu "+strconv.Itoa(m), "was "+strconv.Itoa(have.MTU), func() error {
			if err := k.SetLinkMTU(ctx, have.Index, m); err != nil {
				return fmt.Errorf("set MTU of %s to %d: %w", name, m, err)
			}
			return nil
		}); err != nil {
			return res, err
		}
		have.MTU, changed = m, true
	}
	if mac := spec.Link.MAC; len(mac) > 0 && !bytes.Equal(have.MAC, mac) {
		if err := w.do(dataplane.WriteReplace, name+" mac "+mac.String(), "was "+have.MAC.String(), func() error {
			if err := k.SetLinkMAC(ctx, have.Index, mac); err != nil {
				return fmt.Errorf("set MAC of %s to %s: %w", name, mac, err)
			}
			return nil
		}); err != nil {
			return res, err
		}
		have.MAC, changed = mac, true
		w.res.MACChanged = true
	}
	if err := syncAddrs(ctx, w, have.Index, spec.Family, spec.Addr); err != nil {
		return res, err
	}
	if !have.AdminUp {
		if err := w.do(dataplane.WriteReplace, name+" up", "was down", func() error {
			if err := k.SetLinkUp(ctx, have.Index, true); err != nil {
				return fmt.Errorf("set %s up: %w", name, err)
			}
			return nil
		}); err != nil {
			return res, err
		}
		have.AdminUp, changed = true, true
	}
	if changed && plan == nil {
		if have, err = k.LinkByName(ctx, name); err != nil {
			return res, fmt.Errorf("read device %s: %w", name, err)
		}
	}
	res.Link = have
	return res, nil
}

// writer makes the writes of one device's reconciliation, counting them in
// res.Writes, or, when plan is set, appends them to it instead.
type writer struct {
	k    DeviceKernel
	plan *[]dataplane.Write
	name string
	res  *DeviceResult
}

// do makes one write of the device: op on the object text (kind "link"),
// with detail for the plan; fn makes it.
func (w writer) do(op dataplane.WriteOp, text, detail string, fn func() error) error {
	if w.plan != nil {
		*w.plan = append(*w.plan, dataplane.Write{Op: op, Kind: KindLink, Object: text, Detail: detail})
		return nil
	}
	w.res.Writes++
	return fn()
}

// LinkText is a tunnel device in the words of a Plan and a State: its
// name, kind and attributes, such as "np-vxlan vxlan vni 4096 port 4789
// local 10.0.0.1 parent 2 mtu 1450 mac 02:00:00:00:00:01" (the parent
// is the underlay interface's index). Unset attributes are left out.
func LinkText(l *kernel.Link) string {
	var b strings.Builder
	b.WriteString(l.Name + " " + l.Kind)
	if v := l.VXLAN; v != nil {
		fmt.Fprintf(&b, " vni %d port %d", v.VNI, v.Port)
		if v.Local.IsValid() {
			b.WriteString(" local " + v.Local.String())
		}
		if v.ParentIndex != 0 {
			b.WriteString(" parent " + strconv.Itoa(v.ParentIndex))
		}
	}
	if t := l.IPTunnel; t != nil {
		if t.Local.IsValid() {
			b.WriteString(" local " + t.Local.String())
		}
		if t.Remote.IsValid() {
			b.WriteString(" remote " + t.Remote.String())
		}
		if t.ParentIndex != 0 {
			b.WriteString(" parent " + strconv.Itoa(t.ParentIndex))
		}
	}
	if l.MTU > 0 {
		b.WriteString(" mtu " + strconv.Itoa(l.MTU))
	}
	if len(l.MAC) > 0 {
		b.WriteString(" mac " + l.MAC.String())
	}
	return b.String()
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
// A planned creation returns spec's link as AddLink makes it: down, with
// no index.
func createDevice(ctx context.Context, w writer, spec *DeviceSpec) (kernel.Link, error) {
	name := spec.Link.Name
	l := spec.Link
	err := w.do(dataplane.WriteAdd, LinkText(&spec.Link), "", func() error {
		var err error
		l, err = w.k.AddLink(ctx, spec.Link)
		if errors.Is(err, kernel.ErrExists) {
			have, lerr := w.k.LinkByName(ctx, name)
			switch {
			case lerr == nil && have.Kind != spec.Link.Kind:
				return foreignName(spec, &have)
			case lerr == nil && spec.Compatible != nil && !spec.Compatible(&have):
				return errs.Also(fmt.Errorf("create device %s: an incompatible %s link of that name (index %d) appeared meanwhile", name, have.Kind, have.Index), kernel.ErrExists)
			case lerr == nil:
				l, err = have, nil
			case errors.Is(lerr, kernel.ErrNotFound):
				return conflictError(ctx, w.k, spec, err)
			default:
				return fmt.Errorf("read device %s: %w", name, lerr)
			}
		}
		if err != nil {
			return fmt.Errorf("create device %s: %w", name, err)
		}
		return nil
	})
	if err != nil {
		return kernel.Link{}, err
	}
	w.res.Created = true
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

// SyncAddr is EnsureDevice's address step for a device made otherwise (a
// WireGuard device): it makes want (if valid) the one address of family on
// the interface name with index, link-local ones aside, adding it before
// removing the others. It returns the writes made, or with a non-nil plan
// makes none and appends them to *plan (kind "link").
func SyncAddr(ctx context.Context, k DeviceKernel, name string, index int, family ipfamily.Family, want netip.Prefix, plan *[]dataplane.Write) (int, error) {
	var res DeviceResult
	err := syncAddrs(ctx, writer{k: k, plan: plan, name: name, res: &res}, index, family, want)
	return res.Writes, err
}

// syncAddrs makes want (if valid) the one address of family on the
// interface, link-local ones aside, adding it before removing the others.
func syncAddrs(ctx context.Context, w writer, index int, family ipfamily.Family, want netip.Prefix) error {
	if !family.Valid() {
		return nil
	}
	addrs, err := w.k.Addrs(ctx, family)
	if err != nil {
		return fmt.Errorf("list addresses: %w", err)
	}
	found := false
	var extra []netip.Prefix
	for _, a := range addrs {
		if index == 0 || a.LinkIndex != index || a.Prefix.Addr().IsLinkLocalUnicast() {
			continue // a device to be created has no address yet
		}
		if a.Prefix == want {
			found = true
		} else {
			extra = append(extra, a.Prefix)
		}
	}
	if want.IsValid() && !found {
		if err := w.do(dataplane.WriteReplace, w.name+" addr add "+want.String(), "", func() error {
			if err := w.k.AddAddr(ctx, kernel.Addr{LinkIndex: index, Prefix: want}); err != nil && !errors.Is(err, kernel.ErrExists) {
				return fmt.Errorf("add address %s to %s: %w", want, w.name, err)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	for _, p := range extra {
		if err := w.do(dataplane.WriteReplace, w.name+" addr del "+p.String(), "", func() error {
			if err := w.k.DeleteAddr(ctx, kernel.Addr{LinkIndex: index, Prefix: p}); err != nil && !errors.Is(err, kernel.ErrNotFound) {
				return fmt.Errorf("remove address %s from %s: %w", p, w.name, err)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// RemoveDevice deletes the device called name, of kind, if there is one;
// a link of that name but of another kind is not the device and is left
// alone. A device the kernel will not delete (the fallback tunl0 of the
// ipip module) is kept, emptied of its addresses of family instead:
// undeletable says whether have is one. It returns how many writes it
// made; with a non-nil plan it makes none and appends them to *plan, as
// EnsureDevice does.
func RemoveDevice(ctx context.Context, k DeviceKernel, name, kind string, family ipfamily.Family, undeletable func(have *kernel.Link) bool, plan *[]dataplane.Write) (int, error) {
	var res DeviceResult
	w := writer{k: k, plan: plan, name: name, res: &res}
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
		err := syncAddrs(ctx, w, have.Index, family, netip.Prefix{})
		return res.Writes, err
	}
	err = w.do(dataplane.WriteDelete, LinkText(&have), "", func() error {
		if err := k.DeleteLink(ctx, have.Index); err != nil && !errors.Is(err, kernel.ErrNotFound) {
			return fmt.Errorf("delete device %s: %w", name, err)
		}
		return nil
	})
	return res.Writes, err
}
