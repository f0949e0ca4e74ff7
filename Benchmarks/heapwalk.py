#!/usr/bin/env python3
"""What keeps a relay's heap pages resident: walks glibc's thread arenas of a running process.

Reads every chunk of each thread arena (glibc 2.36, x86-64) through /proc/PID/mem, which pages are
resident through /proc/PID/pagemap, and names each block in use by its first word: a symbol (Swift
type metadata, a C++ vtable, libdispatch's continuation vtables), `heapmeta` (metadata made at run
time), `TCACHE` (a freed block that a thread's cache keeps) or its chunk size. Prints, per arena and
per kind, the resident pages that blocks in use keep (a page shared by several kinds counts for
each in part). Needs root (or ptrace rights on PID). main_arena (the brk heap) is left out: the
relay's main thread allocates little.

  Benchmarks/heapwalk.py PID
"""
import bisect, collections, struct, subprocess, sys

PAGE = 4096
HEAP_ALIGN = 64 << 20  # glibc's HEAP_MAX_SIZE on 64-bit: each thread arena's heap starts on it
STATE_SIZE = 2200  # sizeof(struct malloc_state), glibc 2.36
TOP_OFFSET = 96  # offsetof(struct malloc_state, top)
HEAP_INFO_SIZE = 48  # sizeof(heap_info), glibc 2.36: a later heap's first chunk follows it

pid = int(sys.argv[1])
mem = open(f"/proc/{pid}/mem", "rb", 0)
pagemap = open(f"/proc/{pid}/pagemap", "rb", 0)


def word(address):
    mem.seek(address)
    return struct.unpack("<Q", mem.read(8))[0]


def resident(page):
    pagemap.seek(page * 8)
    return struct.unpack("<Q", pagemap.read(8))[0] >> 63


maps = []
for line in open(f"/proc/{pid}/maps"):
    fields = line.split()
    start, end = (int(x, 16) for x in fields[0].split("-"))
    maps.append((start, end, fields[1], fields[5] if len(fields) > 5 else ""))

# Data symbols of the binary and the Swift libraries, at their load addresses.
symbols = []
loaded = {}
for start, _, _, name in maps:
    loaded.setdefault(name, start)
for name, base in loaded.items():
    if name.startswith("/") and ("linkrelay" in name or "libswift" in name or "libFoundation" in name or "libdispatch" in name):
        out = subprocess.run(["nm", "--defined-only", name], capture_output=True, text=True).stdout
        for line in out.splitlines():
            fields = line.split()
            if len(fields) == 3 and fields[1] in "dDbBrRsSvV":
                symbols.append((int(fields[0], 16) + base, fields[2]))
symbols.sort()
symbol_addresses = [address for address, _ in symbols]


def symbol(address):
    index = bisect.bisect_right(symbol_addresses, address) - 1
    if index >= 0 and address - symbol_addresses[index] < PAGE:
        return symbols[index][1]
    return None


heaps = [(start, end) for start, end, perms, name in maps if name == "" and start % HEAP_ALIGN == 0 and perms.startswith("rw")]
heap_starts = [start for start, _ in heaps]


def chunks(heap):
    """(address, size, in use) of each chunk of one heap of a thread arena, and where they end: at the
    arena's top chunk when it lies in this heap, else at the fence posts that close a full heap (an
    arena that outgrows its 64 MiB heap goes on in another)."""
    arena = word(heap)  # heap_info.ar_ptr
    top = word(arena + TOP_OFFSET)
    end = heap + word(heap + 16)  # heap_info.size
    if heap <= top < end:
        end = top
    if word(heap + 8):  # heap_info.prev: a later heap of the arena
        address = heap + HEAP_INFO_SIZE
    else:
        address = arena + STATE_SIZE
        address += -(address + 16) % 16  # the first chunk's user data is 16-byte aligned
    found = []
    while address < end:
        size = word(address + 8) & ~7
        if size <= 16:  # a fence post
            break
        found.append([address, size, False])
        address += size
    if end == top and address != top:
        return None
    for index, chunk in enumerate(found):  # in use: the next chunk's PREV_INUSE bit
        following = found[index + 1][0] if index + 1 < len(found) else address
        chunk[2] = bool(word(following + 8) & 1)
    return found, address


# tcache_key: the second word of every block that sits in a thread's cache (glibc >= 2.34).
walked = {heap: chunks(heap) for heap in heap_starts}
seconds = collections.Counter(word(address + 24) for found in walked.values() if found for address, _, _ in found[0])
tcache_key = next((key for key, count in seconds.most_common(5) if key > 1 << 40 and count > 100), None)

pages_by_kind = collections.Counter()
bytes_by_kind = collections.Counter()
total_resident = total_live = 0
for heap, found in walked.items():
    if found is None:
        print(f"heap {heap:#x}: not walked (another glibc?)")
        continue
    blocks, end = found
    pages = {page for page in range(heap // PAGE, end // PAGE + 1) if resident(page)}
    kinds_on_page = collections.defaultdict(set)
    live = 0
    for address, size, in_use in blocks:
        if not in_use:
            continue
        first, second = word(address + 16), word(address + 24)
        if second == tcache_key:
            kind = "TCACHE"
        else:
            kind = symbol(first) or ("heapmeta" if any(s <= first < e for s, e in heaps) else f"size{size}")
        bytes_by_kind[kind] += size
        live += size
        for page in range((address + 16) // PAGE, (address + size - 1) // PAGE + 1):
            if page in pages:
                kinds_on_page[page].add(kind)
    for kinds in kinds_on_page.values():
        for kind in kinds:
            pages_by_kind[kind] += 1 / len(kinds)
    only_tcache = sum(1 for kinds in kinds_on_page.values() if kinds == {"TCACHE"})
    total_resident += len(pages)
    total_live += live
    print(f"heap {heap:#x}: {(end - heap) >> 10} KiB of chunks, {live >> 10} KiB in use, "
          f"{len(pages)} pages resident, {only_tcache} kept only by cached free blocks")
print(f"all thread arenas: {total_resident * 4} KiB resident, {total_live >> 10} KiB in use")
print("resident pages kept, by the kind of block in use on them:")
top_kinds = pages_by_kind.most_common(30)
names = subprocess.run(["swift", "demangle", "--simplified"], input="\n".join(kind for kind, _ in top_kinds),
                       capture_output=True, text=True).stdout.splitlines()
for (kind, pages), name in zip(top_kinds, names):
    print(f"{pages:8.1f} pages  {bytes_by_kind[kind] >> 10:6d} KiB in use  {name[:140]}")
