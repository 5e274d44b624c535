// Package ipfamily names the two IP families once for every nodeplane
// package. Drivers and managers come one instance per family (DESIGN.md:
// dual stack means two independent instances); their options take a
// Family, and they use its methods to reject addresses and prefixes of the
// other family at the API boundary.
//
// The package is pure logic, owns no kernel state and builds everywhere.
package ipfamily
