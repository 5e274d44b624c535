# nodeplane — see README.md.
.PHONY: test
# Runs every check and test of every module (installs missing tools first).
test:
	./scripts/test.sh

.PHONY: demo
# The one-command demo (needs root): three nodes in network namespaces, one
# reference agent each, checks printed step by step; everything removed after.
demo:
	./scripts/demo.sh

.PHONY: e2e
# Opt-in end-to-end test (needs root): a released kube-apiserver and etcd built
# from their Go modules (cached), two agents as nodes, see README.md.
e2e:
	./scripts/e2e.sh
