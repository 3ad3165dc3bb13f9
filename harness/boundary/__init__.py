"""Everything untrusted runs through here: processes, the bubblewrap sandbox, the network
(proxy, forwarder, egress rules), the agent registry and installed CLIs, command rules,
ai/policy.toml, the containment of one call and the worker process itself."""
