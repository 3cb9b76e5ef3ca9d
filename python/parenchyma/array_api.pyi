# Type stubs for parenchyma.array_api (filled below).
