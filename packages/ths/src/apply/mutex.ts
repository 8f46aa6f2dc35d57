/**
 * One apply at a time per repository in this process (host §4: conflicting edits are serialized).
 * Across processes the store's single writer serializes them: only one host holds a level store.
 */
export class KeyedMutex {
  private readonly tails = new Map<string, Promise<void>>();

  /** Run `fn` after every earlier holder of `key` finished (resolved or failed). */
  async run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const before = this.tails.get(key) ?? Promise.resolve();
    let release = (): void => {};
    const mine = new Promise<void>((r) => {
      release = r;
    });
    const tail = before.then(() => mine);
    this.tails.set(key, tail);
    await before;
    try {
      return await fn();
    } finally {
      release();
      if (this.tails.get(key) === tail) this.tails.delete(key);
    }
  }
}
