"""Tool descriptors and what they name: adapters, pointers, file references, schemas, secret arguments, states."""
