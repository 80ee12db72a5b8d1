"""memkit's dev kit: the local stack (memkit_dev.local) and the `memkit` command
(memkit_dev.cli). Installed with the package, never shipped in the Lambda layer."""
