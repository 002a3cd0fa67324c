import LANSyncCore
import LANSyncCrypto
import LANSyncWire

/// libFuzzer's entry point: feeds arbitrary bytes to every decoder that reads bytes from the
/// network (wire messages, handshake payloads and the Noise handshake messages themselves). Decoders must never crash, hang or allocate beyond limits; whatever decodes must
/// encode and decode back to the same value.
///
/// Build and run (see scripts/fuzz):
///     swift build --product lansync-fuzz-wire --sanitize fuzzer -Xswiftc -DFUZZING
///     .build/debug/lansync-fuzz-wire Fuzz/corpus/wire -max_total_time=60
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzWire(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    WireFuzzing.check(bytes)
    HandshakeFuzzing.check(bytes)
    return 0
}

/// The handshake also parses bytes from the network: feed them as message 1 to a responder, and
/// as message 2 to an initiator that has sent message 1. Keys are made once, so runs stay fast.
enum HandshakeFuzzing {
    static let psk = SecureBytes(copying: [UInt8](repeating: 7, count: 32))
    static let ours = KeyPair.generate()
    static let ephemeral = KeyPair.generate()
    static let prologue = WireProtocol.prologue

    static func check(_ bytes: [UInt8]) {
        var responder = NoiseHandshake(
            pattern: .xxpsk0,
            initiator: false,
            prologue: prologue,
            staticKey: ours,
            psk: psk
        )
        if (try? responder.readMessage(bytes)) != nil {
            // Authentic only if someone forged the PSK: then the next step must still work.
            _ = try? responder.writeMessage()
        }
        var initiator = NoiseHandshake(
            pattern: .xxpsk0,
            initiator: true,
            prologue: prologue,
            staticKey: ours,
            psk: psk,
            ephemeral: ephemeral
        )
        _ = try? initiator.writeMessage()
        _ = try? initiator.readMessage(bytes)
    }
}
