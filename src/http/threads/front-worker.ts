/** Entry of a delivery thread's Worker (pool.ts starts it): the message loop around DeliveryFront. */
import { delayAt } from "../../testing/hold-points";
import { DeliveryFront } from "./front";
import type { FromFront, ToFront } from "./protocol";

declare const self: Worker;

const post = (message: FromFront) => self.postMessage(message);
let front: DeliveryFront | undefined;

self.onmessage = (event: MessageEvent<ToFront>) => {
  const message = event.data;
  if (message.type === "init") {
    try {
      front = new DeliveryFront(message, post);
      front.listen(message);
      post({ type: "listening" });
    } catch (err) {
      post({ type: "failed", error: (err as Error).message });
    }
  } else if (message.type === "invalidate") {
    const late = delayAt("front.apply-late");
    if (late) setTimeout(() => front?.apply(message), late);
    else front?.apply(message);
  } else if (message.type === "report") {
    front?.flushReports();
    post({ type: "reported" });
  } else if (message.type === "stop") {
    void (front?.stop() ?? Promise.resolve()).finally(() => post({ type: "stopped" }));
  }
};
