import LANSyncCore
import LANSyncWire

/// libFuzzer's entry point: feeds arbitrary bytes to every decoder that reads bytes from the
/// network. Decoders must never crash, hang or allocate beyond limits; whatever decodes must
/// encode and decode back to the same value.
///
/// Build and run (see scripts/fuzz):
///     swift build --product lansync-fuzz-wire --sanitize fuzzer -Xswiftc -DFUZZING
///     .build/debug/lansync-fuzz-wire Fuzz/corpus/wire -max_total_time=60
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzWire(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    WireFuzzing.check(bytes)
    return 0
}
