"""A local stack: servers, keys, credentials, ports, the services started, watched and waited for."""
