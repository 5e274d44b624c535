# nodeplane — see README.md.
.PHONY: test
# Runs every check and test of every module (installs missing tools first).
test:
	./scripts/test.sh
