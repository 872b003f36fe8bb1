"""What every effectgate service and agent speaks.

Events, catalog, descriptors, vocabulary, canonical form, signing, sealing,
request/reply types and the error root.
"""
