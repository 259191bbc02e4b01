"""Native modules bridging the VM to the host: hal, io_parameters, vmvx, testing."""
