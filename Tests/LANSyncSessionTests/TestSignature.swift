/// 64 bytes standing for a writer's signature where a test needs one and checks none (the
/// session machine carries it unchanged; the store's tests check real ones).
let testSignature = [UInt8](repeating: 0xA5, count: 64)
