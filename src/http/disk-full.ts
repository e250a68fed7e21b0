import { ApiError } from "./errors";

export { isDiskFull } from "../errors";

export const DISK_FULL_MESSAGE = "服务器存储空间不足，暂时无法写入，请稍后重试或联系管理员";

export const diskFullError = () => new ApiError(503, DISK_FULL_MESSAGE, { "retry-after": "60" });
