/**
 * The three OAuth providers' local fakes, started together, and a driver maker for each: the
 * shared setup of the OAuth driver tests (conformance, hostile answers).
 */
import type { Driver } from "../../../src/channels/driver.ts";
import { createDriveDriver } from "../../../src/channels/drivers/drive.ts";
import { createDropboxDriver } from "../../../src/channels/drivers/dropbox.ts";
import { createOnedriveDriver } from "../../../src/channels/drivers/onedrive.ts";
import type { OAuthDriverOptions } from "../../../src/channels/oauth/driver-kit.ts";
import { FakeDrive } from "./drive.ts";
import { FakeDropbox } from "./dropbox.ts";
import { type FakeOAuth, oauthAppConfig } from "./oauth.ts";
import { FakeOnedrive } from "./onedrive.ts";

export interface OAuthProvider {
  name: "onedrive" | "drive" | "dropbox";
  oauth: FakeOAuth;
  /** A driver on this provider's fake, with `config` over the app's credentials and a fresh token. */
  make(config: Record<string, string>, opts?: OAuthDriverOptions): Driver;
}

/** Starts the three fakes; `stop()` ends them (call it in afterAll). */
export function startOAuthFakes() {
  const onedrive = new FakeOnedrive();
  const drive = new FakeDrive();
  const dropbox = new FakeDropbox();
  const providers: OAuthProvider[] = [
    {
      name: "onedrive",
      oauth: onedrive.oauth,
      make: (config, opts = {}) =>
        createOnedriveDriver(
          { ...oauthAppConfig(onedrive), drive_id: onedrive.driveId, drive_type: "personal", ...config },
          { apiBase: onedrive.origin, ...opts },
        ),
    },
    {
      name: "drive",
      oauth: drive.oauth,
      make: (config, opts = {}) => createDriveDriver({ ...oauthAppConfig(drive), ...config }, { apiBase: drive.origin, ...opts }),
    },
    {
      name: "dropbox",
      oauth: dropbox.oauth,
      make: (config, opts = {}) => createDropboxDriver({ ...oauthAppConfig(dropbox), ...config }, { apiBase: dropbox.origin, ...opts }),
    },
  ];
  const stop = () => {
    onedrive.stop();
    drive.stop();
    dropbox.stop();
  };
  return { onedrive, drive, dropbox, providers, stop };
}
