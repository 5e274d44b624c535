// Package deploy holds what installs nodeplane's reference agent on a
// Kubernetes cluster: the image definition (Containerfile), the DaemonSet,
// its RBAC, the admission policy that keeps each agent to its own Node, and
// the kustomization that applies them (README.md says how). The package has
// no code; its tests check the manifests against the agent they deploy.
package deploy
